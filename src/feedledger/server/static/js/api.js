// The JSON API as the pages call it. The write token lives in this module's memory
// only: never in localStorage, sessionStorage, a cookie or the URL.
let token = null;
const ROOT = document.body.dataset.root || ""; // `serve --root-path`

export function setToken(value) {
  token = value ? String(value) : null;
}

export function hasToken() {
  return token !== null;
}

export class ProblemError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || `HTTP ${status}`);
    this.status = status;
    this.problem = problem || {};
  }
}

async function answer(response) {
  const type = response.headers.get("content-type") || "";
  const body = type.includes("json") ? await response.json() : await response.text();
  if (!response.ok) {
    throw new ProblemError(response.status, typeof body === "object" ? body : { detail: body });
  }
  return body;
}

export function url(path, params) {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(params || {})) {
    if (value !== undefined && value !== null && value !== "") query.set(name, value);
  }
  const text = query.toString();
  return text ? `${path}?${text}` : path;
}

export async function getJSON(path, params) {
  const response = await fetch(ROOT + url(path, params), { headers: { Accept: "application/json" } });
  return answer(response);
}

export async function postJSON(path, body) {
  const headers = { Accept: "application/json", "Content-Type": "application/json" };
  if (token !== null) headers.Authorization = `Bearer ${token}`;
  const response = await fetch(ROOT + path, { method: "POST", headers, body: JSON.stringify(body || {}) });
  return answer(response);
}

// a path segment (a source, key or run id) as the API takes it
export const seg = (value) => encodeURIComponent(value);
