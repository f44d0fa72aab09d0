// The one place the page talks to the gateway: same-origin fetches carrying the session
// cookie, and the CSRF header on anything that changes state (the gateway refuses it without).
let csrf = "";

export class ApiError extends Error {
  constructor(status, body) {
    super(body?.error?.message || `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

export function setCsrf(value) { csrf = value || ""; }

export async function api(path, { method = "GET", body, signal } = {}) {
  const headers = { Accept: "application/json" };
  if (method !== "GET" && method !== "HEAD") headers["X-Eops-Csrf"] = csrf;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method, headers, signal, credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (response.status === 204) return null;
  const data = await response.json().catch(() => null);
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

// Server-sent events through EventSource: it sends the cookie (it cannot send headers).
// `watch` names the ids shown, so a replica that does not run them still follows them.
export function events(watch, onChange) {
  const query = watch.length ? `?watch=${encodeURIComponent(watch.join(","))}` : "";
  const source = new EventSource(`/v1/events${query}`);
  source.addEventListener("changes", (e) => onChange(JSON.parse(e.data).changes));
  source.addEventListener("resync", () => onChange(null));
  return () => source.close();
}

// A response body read as it arrives (the log follower), handing each text chunk over.
export async function stream(path, onText, signal) {
  const response = await fetch(path, { credentials: "same-origin", signal });
  if (!response.ok) throw new ApiError(response.status, await response.json().catch(() => null));
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    onText(decoder.decode(value, { stream: true }));
  }
}
