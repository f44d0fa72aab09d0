// The invocations list: filters (function, state, batch, accepted before/after), pages from the
// store by keyset (the API's cursor), rows kept live by the event stream without a reload.
import { api, events } from "./api.js";
import { STATES, cursorBefore, el, scroll, seconds, when, zoneName } from "./format.js";

const PAGE = 50;
const REFRESH_MS = 2000;  // bench/console_load.py: the browser's reads during a burst

export function render(main, _arg, { session }) {
  const params = new URLSearchParams(location.hash.split("?")[1] || "");
  const fn = el("input", { id: "f-function", name: "function", value: params.get("function") || "", placeholder: "any" });
  const state = el("select", { id: "f-state", name: "state" },
    el("option", { value: "", text: "any" }),
    STATES.map((s) => el("option", { value: s, text: s, selected: params.get("state") === s })));
  const batch = el("input", { id: "f-batch", name: "batch", value: params.get("batch") || "", placeholder: "any",
    spellcheck: "false" });
  const before = el("input", { id: "f-before", name: "before", type: "datetime-local", value: params.get("before") || "" });
  const after = el("input", { id: "f-after", name: "after", type: "datetime-local", value: params.get("after") || "" });
  const form = el("form", { class: "filters", onsubmit: (e) => {
    e.preventDefault();
    const q = new URLSearchParams();
    for (const [k, input] of [["function", fn], ["state", state], ["batch", batch], ["before", before], ["after", after]]) {
      if (input.value) q.set(k, input.value);
    }
    location.hash = `#/invocations?${q}`;
  } },
  el("label", { for: "f-function", text: "Function" }), fn,
  el("label", { for: "f-state", text: "State" }), state,
  el("label", { for: "f-batch", text: "Batch" }), batch,
  el("label", { for: "f-after", text: `Accepted after (${zoneName()})` }), after,
  el("label", { for: "f-before", text: "before" }), before,
  el("button", { type: "submit", text: "Filter" }));

  const body = el("tbody");
  const table = el("table", { class: "list", "aria-label": "invocations" },
    el("thead", {}, el("tr", {}, ["Invocation", "Function", "State", "Accepted", "Time to start", "Total", "Batch"]
      .map((h) => el("th", { scope: "col", text: h })))), body);
  const more = el("button", { type: "button", id: "more", hidden: true, text: "Older…" });
  const status = el("p", { class: "muted", id: "list-status" });
  main.append(el("h1", { text: "Invocations" }), form, status, scroll(table), more);

  const afterMs = after.value ? Date.parse(after.value) : null;
  const firstCursor = before.value ? cursorBefore(Date.parse(before.value)) : null;
  const pages = [firstCursor];  // the cursor of each page shown: live refreshes re-read them all
  let next = null;
  let closeEvents = () => {};
  let watched = null;  // the ids the open stream watches (null: none open yet)
  let refreshing = null;
  let again = false;
  let timer = null;

  function query(cursor) {
    const q = new URLSearchParams({ limit: String(PAGE) });
    if (fn.value) q.set("function", fn.value);
    if (state.value) q.set("state", state.value);
    if (batch.value) q.set("batch", batch.value.trim());
    if (cursor) q.set("cursor", cursor);
    return `/v1/invocations?${q}`;
  }

  function row(inv) {
    return el("tr", { "data-id": inv.id, "data-state": inv.state },
      el("td", {}, el("a", { href: `#/invocations/${encodeURIComponent(inv.id)}`, text: inv.id })),
      el("td", { text: inv.function }),
      el("td", {}, el("span", { class: `state s-${inv.state}`, text: inv.state })),
      el("td", { text: when(inv.timeline.accepted) }),
      el("td", { text: seconds(inv.durations.time_to_start) }),
      el("td", { text: seconds(inv.durations.total) }),
      el("td", {}, inv.batch_id ? el("a", { href: `#/batches/${encodeURIComponent(inv.batch_id)}`, class: "batch",
        text: inv.batch_id }) : "–"));
  }

  async function load() {
    const rows = [];
    let cursor = null;
    for (const pageCursor of pages) {
      const page = await api(query(pageCursor));
      let items = page.items;
      if (afterMs !== null) items = items.filter((i) => Date.parse(i.timeline.accepted) >= afterMs);
      rows.push(...items);
      cursor = items.length === page.items.length ? page.next_cursor : null;
    }
    next = cursor;
    // Keyboard users keep their place: the link that had focus has it again after the redraw.
    const focused = document.activeElement?.closest?.("tr")?.dataset.id;
    body.replaceChildren(...rows.map(row));
    if (focused) body.querySelector(`tr[data-id="${focused}"] a`)?.focus();
    more.hidden = !next;
    status.textContent = rows.length ? `${rows.length} shown, newest first` : "No invocations match.";
    // Interactive from here: what bench/console_load.py times (and any real-user measure can).
    if (!performance.getEntriesByName("eops:list-ready").length) performance.mark("eops:list-ready");
    follow(rows.map((i) => i.id));
  }

  // One read at a time, and at most one queued behind it, 2 s later: a burst of changes
  // costs a read every 2 s per open page, never one per change (the first change after a
  // quiet spell is shown at once).
  function refresh() {
    if (refreshing) { again = true; return; }
    refreshing = load().catch((e) => { status.textContent = e.message; if (e.status === 401) throw e; })
      .finally(() => {
        refreshing = null;
        if (again) { again = false; timer = setTimeout(refresh, REFRESH_MS); }
      });
  }

  function follow(ids) {
    // Only a follower needs the ids it shows watched (the leader hears every change itself):
    // anywhere else one stream stays open, rather than one more request per redraw.
    const key = session.role === "follower" ? ids.slice(0, 200).join(",") : "";
    if (key === watched) return;
    watched = key;
    closeEvents();
    closeEvents = events(key ? key.split(",") : [], (changes) => {
      if (changes) {
        for (const c of changes) {
          const tr = body.querySelector(`tr[data-id="${c.id}"]`);
          if (tr) {
            tr.dataset.state = c.state;
            tr.querySelector(".state").textContent = c.state;
            tr.querySelector(".state").className = `state s-${c.state}`;
          }
        }
      }
      refresh();
    });
  }

  more.addEventListener("click", () => { pages.push(next); refresh(); });
  refresh();
  return () => { closeEvents(); clearTimeout(timer); };
}
