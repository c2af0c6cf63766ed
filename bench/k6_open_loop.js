// One open-loop step of bench/open_loop.py: RATE requests a second for DURATION,
// each a distinct path of the file PATHS (one per line), from line START on, so
// none is answered from the response cache. k6's constant-arrival-rate executor
// starts requests on its own clock whatever the server does (open loop).
import http from 'k6/http';
import exec from 'k6/execution';
import { SharedArray } from 'k6/data';

const paths = new SharedArray('paths', () => open(__ENV.PATHS).split('\n').filter((line) => line.length > 0));
const start = Number(__ENV.START);

export const options = {
  discardResponseBodies: true,
  summaryTrendStats: ['p(50)', 'p(99)', 'p(99.9)', 'max'],
  scenarios: {
    open: {
      executor: 'constant-arrival-rate',
      rate: Number(__ENV.RATE),
      timeUnit: '1s',
      duration: __ENV.DURATION,
      // Enough virtual users for 25 ms answers at a few thousand a second, and
      // room to queue: a request with no free user is dropped and counted.
      preAllocatedVUs: 64,
      maxVUs: 1024,
    },
  },
};

export default function () {
  http.get(__ENV.BASE + paths[(start + exec.scenario.iterationInTest) % paths.length], { timeout: '5s' });
}

export function handleSummary(data) {
  return { [__ENV.SUMMARY]: JSON.stringify(data) };
}
