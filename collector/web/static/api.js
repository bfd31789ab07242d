// The one place the console talks to the collector: the same /v1 API a script uses.
// A failure is an ApiError that says what failed (the path), the status and why, in words.
import { t } from "./i18n.js";

const TOKEN_KEY = "gpufleet.token";

export class AuthError extends Error {}

export class ApiError extends Error {
  constructor(path, status, why) {
    super(status ? t("err.status", { path, status, why }) : t("err.network", { path, why }));
    this.path = path;
    this.status = status;
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

// an HTML page (a proxy's error, a sign-in page) is said so, not "Unexpected token '<'"
async function decode(response, path) {
  const type = response.headers.get("content-type") || "";
  const text = await response.text();
  if (!type.includes("json")) {
    const why = /^\s*</.test(text) ? t("err.html") : t("err.not_json", { type: type || "?" });
    throw new ApiError(path, response.status, why);
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new ApiError(path, response.status, t("err.bad_json"));
  }
}

async function call(method, path) {
  const headers = { Accept: "application/json" };
  const bearer = token();
  if (bearer) headers.Authorization = "Bearer " + bearer;
  const shortPath = path.split("?")[0];
  let response;
  try {
    response = await fetch(path, { method, headers, cache: "no-store" });
  } catch (err) {
    throw new ApiError(shortPath, 0, err.message);
  }
  if (response.status === 401) throw new AuthError("unauthorized");
  const body = await decode(response, shortPath);
  if (!response.ok) throw new ApiError(shortPath, response.status, body.error || response.statusText);
  return body;
}

export const getJSON = (path) => call("GET", path);
export const postJSON = (path) => call("POST", path);

export function query(path, params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) search.set(name, String(value));
  return `${path}?${search}`;
}
