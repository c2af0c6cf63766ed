// Calls every /api/v1 endpoint with the types openapi-typescript generated (./api.d.ts, made at test time):
// a success, an error and a HEAD of each, every answer checked at run time against what its type says.
// Compiled by tsc --strict and run by Node.js (tests/test_generated_clients.py); QSITE_BASE is the server.
import type { components, paths } from "./api";

declare const process: { env: Record<string, string | undefined>; exitCode?: number };

type Schemas = components["schemas"];
type Problem = Schemas["Problem"];
/** The JSON body of a path's 200, as the document types it. */
type Ok<P extends keyof paths> = paths[P]["get"] extends { responses: { 200: { content: { "application/json": infer B } } } } ? B : never;
type Query<P extends keyof paths> = paths[P]["get"] extends { parameters: { query?: infer Q } } ? NonNullable<Q> : never;

const base = process.env.QSITE_BASE ?? "";
const called = new Set<string>();

function check(condition: boolean, what: string): asserts condition {
  if (!condition) throw new Error(`failed: ${what}`);
}

function url(path: string, query: Record<string, string | number | string[] | undefined> = {}): string {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    for (const one of Array.isArray(value) ? value : value === undefined ? [] : [value]) search.append(name, String(one));
  }
  const text = search.toString();
  return base + path + (text ? `?${text}` : "");
}

async function head(target: string, status: number): Promise<void> {
  const answer = await fetch(target, { method: "HEAD" });
  check(answer.status === status, `HEAD ${target}: ${answer.status}`);
  check((await answer.text()) === "", `HEAD ${target}: a body`);
}

/** GET ``target`` expecting ``status``, parsed as JSON of type T; then HEAD it too. */
async function get<T>(target: string, status: number): Promise<T> {
  const answer = await fetch(target);
  check(answer.status === status, `GET ${target}: ${answer.status}`);
  const type = answer.headers.get("content-type") ?? "";
  check(type.startsWith(status < 400 ? "application/json" : "application/problem+json"), `GET ${target}: ${type}`);
  const body = (await answer.json()) as T;
  await head(target, status);
  return body;
}

/** An error of an endpoint: a problem whose status is the HTTP status. */
async function problem(name: string, target: string, status: number): Promise<Problem> {
  const body = await get<Problem>(target, status);
  check(body.status === status && body.type.startsWith("/api/v1/problems/"), `${target}: problem ${JSON.stringify(body)}`);
  called.add(name);
  return body;
}

const tags: Schemas["Tag"][] = ["Science", "Industry", "Investing"];

const index = await get<Ok<"/api/v1">>(url("/api/v1"), 200);
check(index.version === "v1" && index.languages.length > 1, "index");
await problem("index", url("/api/v1", { unknown: 1 }), 400);

const lang: Query<"/api/v1/openapi.json">["lang"] = "de";
const document = await get<Ok<"/api/v1/openapi.json">>(url("/api/v1/openapi.json", { lang }), 200);
check(document.openapi === "3.1.0", "openapi");
await problem("openapi", url("/api/v1/openapi.json", { lang: "xx" }), 400);

const page = await fetch(url("/api/v1/docs", { lang: "ZH-hans" }));
check(page.status === 200 && (await page.text()).includes("<html"), "docs");
await head(url("/api/v1/docs"), 200);
await problem("docs", url("/api/v1/docs", { lang: "english" }), 400);

const courses = await get<Ok<"/api/v1/courses">>(url("/api/v1/courses"), 200);
check(courses.count === courses.results.length && courses.results.every((course) => Array.isArray(course.sections)), "courses");
const level: string | null = courses.results[0].level;
check(level === null || typeof level === "string", "course level");
await problem("courses", url("/api/v1/courses", { id: 1 }), 400);

const glossary = await get<Ok<"/api/v1/glossary">>(url("/api/v1/glossary", { q: "qubit" }), 200);
check(glossary.results.length > 0, "glossary search");
await problem("glossary", url("/api/v1/glossary", { q: "x".repeat(201) }), 400);

const entry = await get<Ok<"/api/v1/glossary/{id}">>(url(`/api/v1/glossary/${encodeURIComponent(glossary.results[0].id)}`), 200);
check(entry.term === glossary.results[0].term && typeof entry.lesson.url === "string", "glossary entry");
await problem("glossary_entry", url("/api/v1/glossary/no-such-entry"), 404);

const newsQuery: Query<"/api/v1/news"> = { tag: "Science", limit: 2 };
const news = await get<Ok<"/api/v1/news">>(url("/api/v1/news", newsQuery), 200);
const pageTag: Schemas["Tag"] | null = news.tag;
check(pageTag === "Science" && news.results.every((item) => item.tag === "Science"), "news tag");
check(news.next !== null, "news next");
const next = await get<Ok<"/api/v1/news">>(base + news.next, 200);
check(next.results.every((item) => tags.includes(item.tag)), "news next page");
const everything = await get<Ok<"/api/v1/news">>(url("/api/v1/news", { tag: "science" }), 200); // any letter case
check(everything.tag === "Science", "news any case");
const refused = await problem("news", url("/api/v1/news", { limit: 0 }), 400);
check(refused.errors?.[0]?.parameter === "limit", "news error names limit");

const changed = await get<Ok<"/api/v1/news">>(url("/api/v1/news", { updated_since: "1970-01-01T00:00:00Z", limit: 3 }), 200);
check(changed.results.every((item, i) => i === 0 || changed.results[i - 1].updated_at <= item.updated_at), "news updated_since order");
const removedQuery: Query<"/api/v1/news/removed"> = { since: "1970-01-01T00:00:00Z" };
const removed = await get<Ok<"/api/v1/news/removed">>(url("/api/v1/news/removed", removedQuery), 200);
check(removed.count === removed.results.length && removed.results.every((item) => typeof item.removed_at === "string"), "news removed");
await problem("news_removed", url("/api/v1/news/removed", { since: "yesterday" }), 400);

const sources = await get<Ok<"/api/v1/sources">>(url("/api/v1/sources"), 200);
check(sources.results.every((source) => tags.includes(source.tag) && (source.last_success_at === null || typeof source.last_success_at === "string")), "sources");
await problem("sources", url("/api/v1/sources", { tag: "Science" }), 400);

const stats = await get<Ok<"/api/v1/stats">>(url("/api/v1/stats"), 200);
check(stats.courses === courses.count, "stats");
await problem("stats", url("/api/v1/stats", { unknown: 1 }), 400);

const snapshot = await get<Ok<"/api/v1/snapshot">>(url("/api/v1/snapshot"), 200);
check(snapshot.bytes > 0 && /^[0-9a-f]{64}$/.test(snapshot.sha256), "snapshot");
await problem("snapshot", url("/api/v1/snapshot", { unknown: 1 }), 400);

// the file: bytes (application/octet-stream), a SQLite database whose SHA-256 is its ETag
type File = paths["/api/v1/snapshot/{file}"]["get"]["responses"][200]["content"]["application/octet-stream"];
const download = await fetch(base + snapshot.download);
check(download.status === 200 && download.headers.get("content-type") === "application/octet-stream", "snapshot file");
const bytes = new Uint8Array(await download.arrayBuffer());
const file: File = new TextDecoder("latin1").decode(bytes.slice(0, 16));
check(file === "SQLite format 3\u0000" && bytes.length === snapshot.bytes, "snapshot file bytes");
check(download.headers.get("etag") === `"${snapshot.sha256}"`, "snapshot file etag");
await head(base + snapshot.download, 200);
await problem("snapshot_file", url("/api/v1/snapshot/site-v00000001-0000000000000000.db"), 404);

console.log("ok");
console.log(`endpoints=${called.size}`);
