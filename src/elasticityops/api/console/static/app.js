// The console's shell: who is logged in, the hash router, and each page's clean-up (its
// event stream and timers) when another one is shown.
import { api, setCsrf } from "./api.js";
import { el } from "./format.js";

const pages = {
  invocations: () => import("./invocations.js"),
  invocation: () => import("./invocation.js"),
  capacity: () => import("./capacity.js"),
  functions: () => import("./functions.js"),
  function: () => import("./function.js"),
  batch: () => import("./batch.js"),
  cost: () => import("./cost.js"),
};
const main = document.getElementById("main");
let cleanup = () => {};
let session = null;

function route() {
  const [, page = "invocations", arg] = location.hash.split("/");
  if (page === "invocations" && arg) return ["invocation", decodeURIComponent(arg)];
  if (page === "functions" && arg) return ["function", decodeURIComponent(arg)];
  if (page === "batches" && arg) return ["batch", decodeURIComponent(arg)];
  return [page, arg ? decodeURIComponent(arg) : null];  // #/cost/7d: a page's own choice
}

async function show() {
  cleanup();
  cleanup = () => {};
  if (!session) return showLogin();
  const [page, arg] = route();
  const load = pages[page] || pages.invocations;
  for (const link of document.querySelectorAll("#nav a")) {
    const current = link.dataset.page === ({ invocation: "invocations", batch: "invocations", function: "functions" }[page] || page);
    if (current) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  const module = await load();
  main.replaceChildren();
  cleanup = module.render(main, arg, { session }) || (() => {});
  main.focus({ preventScroll: true });
}

function signedIn(data) {
  session = data;
  setCsrf(data.csrf);
  document.getElementById("nav").hidden = false;
  document.getElementById("logout").hidden = false;
  document.getElementById("who").textContent = `${data.token.name} (${data.token.scope})`;
}

function showLogin(message = "") {
  document.getElementById("nav").hidden = true;
  document.getElementById("logout").hidden = true;
  document.getElementById("who").textContent = "";
  const input = el("input", {
    id: "token", type: "password", name: "token", autocomplete: "current-password",
    required: true, spellcheck: "false", "aria-describedby": "login-help",
  });
  const error = el("p", { class: "error", role: "alert", text: message });
  const form = el("form", { class: "login", onsubmit: async (event) => {
    event.preventDefault();
    error.textContent = "";
    try {
      signedIn(await api("/ui/login", { method: "POST", body: { token: input.value } }));
      input.value = "";
      show();
    } catch (e) {
      error.textContent = e.message;
      input.focus();
    }
  } },
  el("h1", { text: "Log in" }),
  el("label", { for: "token", text: "API token" }), input,
  el("p", { id: "login-help", class: "muted",
    text: "The token `eops serve` printed, or one from `eops token create`. It is exchanged for a session cookie; the page never keeps it." }),
  el("button", { type: "submit", text: "Log in" }), error);
  main.replaceChildren(form);
  input.focus();
}

document.getElementById("logout").addEventListener("click", async () => {
  await api("/ui/logout", { method: "POST" }).catch(() => null);
  session = null;
  cleanup();
  cleanup = () => {};
  showLogin();
});

window.addEventListener("hashchange", show);
// Any 401 from a page (token revoked, session over) brings the login back.
window.addEventListener("unhandledrejection", (event) => {
  if (event.reason?.status === 401) {
    session = null;
    showLogin(event.reason.message);
  }
});

// The page's module loads while the session is asked for, not after.
pages[route()[0]]?.();
try {
  signedIn(await api("/ui/session"));
} catch {
  session = null;
}
show();
