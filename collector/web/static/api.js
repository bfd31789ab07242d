// The one place the console talks to the collector: the same /v1 API a script uses.
const TOKEN_KEY = "gpufleet.token";

export class AuthError extends Error {}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

async function call(method, path) {
  const headers = { Accept: "application/json" };
  const bearer = token();
  if (bearer) headers.Authorization = "Bearer " + bearer;
  const response = await fetch(path, { method, headers, cache: "no-store" });
  if (response.status === 401) throw new AuthError("unauthorized");
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`);
  return body;
}

export const getJSON = (path) => call("GET", path);
export const postJSON = (path) => call("POST", path);

export function query(path, params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) search.set(name, String(value));
  return `${path}?${search}`;
}
