// One batch (GET /v1/batches/{id}): its function, size and progress, its counts by state as a
// bar and chips, and its invocations in input order a page at a time; kept live by the
// console's event stream as the invocations list is (a change re-reads the pages shown, at
// most every 2 s), and Cancel for all of it that has not ended, after a confirm.
import { api, events } from "./api.js";
import { STATES, el, scroll, seconds, when } from "./format.js";

const PAGE = 100;
const REFRESH_MS = 2000;  // as the invocations list: a burst of changes costs a read every 2 s

export function render(main, id, { session }) {
  const error = el("p", { class: "error", role: "alert" });
  const facts = el("dl", { class: "facts", id: "batch-facts" });
  const progress = el("progress", { id: "batch-progress", max: "1", value: "0" });
  const progressText = el("span", { class: "value", id: "batch-progress-text" });
  const bar = el("div", { class: "track stacked", id: "batch-bar", role: "img", "aria-label": "counts by state" });
  const chips = el("p", { class: "chips", id: "batch-counts" });
  const cancel = el("button", { type: "button", id: "cancel", hidden: true, text: "Cancel the batch" });
  // A second step, not window.confirm (which a page cannot style and a test's browser dismisses).
  const confirmText = el("span", { id: "cancel-question" });
  const confirmYes = el("button", { type: "button", id: "cancel-confirm", class: "danger", text: "Yes, cancel them" });
  const confirmNo = el("button", { type: "button", id: "cancel-keep", text: "Keep them" });
  const confirmBox = el("p", { class: "notice", id: "cancel-box", role: "group", "aria-label": "confirm cancel", hidden: true },
    confirmText, " ", confirmYes, " ", confirmNo);
  const body = el("tbody");
  const table = el("table", { class: "list", "aria-label": "the batch's invocations" },
    el("thead", {}, el("tr", {}, ["#", "Invocation", "State", "Time to start", "Total"]
      .map((h) => el("th", { scope: "col", text: h })))), body);
  const more = el("button", { type: "button", id: "more", hidden: true, text: "More…" });
  const status = el("p", { class: "muted", id: "list-status" });
  main.append(el("p", {}, el("a", { href: "#/invocations", text: "← Invocations" })),
    el("h1", { text: id }), cancel, confirmBox, error, facts,
    el("h2", { text: "Progress" }), el("div", { class: "meter" }, el("span", { class: "label", text: "ended" }),
      progress, progressText), bar, chips,
    el("h2", { text: "Invocations (in input order)" }), status, scroll(table), more);

  const gone = new AbortController();
  const pages = [null];  // the cursor of each page shown: a refresh re-reads them all
  let batch = null;
  let next = null;
  let closeEvents = () => {};
  let watched = null;
  let refreshing = null;
  let again = false;
  let timer = null;

  function path(cursor) {
    const q = new URLSearchParams({ limit: String(PAGE) });
    if (cursor) q.set("cursor", cursor);
    return `/v1/batches/${encodeURIComponent(id)}?${q}`;
  }

  function draw(rows) {
    const fn = batch.function;
    facts.dataset.done = String(batch.done);
    facts.replaceChildren(
      el("dt", { text: "Function" }), el("dd", {}, el("a", { href: `#/functions/${encodeURIComponent(fn)}`, text: fn })),
      el("dt", { text: "Created" }), el("dd", { text: when(batch.created_at) }),
      el("dt", { text: "Invocations" }), el("dd", { text: String(batch.count) }),
      el("dt", { text: "Listed" }), el("dd", {}, el("a", { href: `#/invocations?batch=${encodeURIComponent(batch.id)}`,
        text: "in the invocations list" })),
      ...(batch.idempotency_key ? [el("dt", { text: "Idempotency key" }), el("dd", { text: batch.idempotency_key })] : []));
    progress.max = batch.count;
    progress.value = batch.ended;
    progressText.textContent = `${batch.ended} of ${batch.count}`;
    progressText.dataset.ended = String(batch.ended);
    const shown = STATES.filter((s) => batch.counts[s]);
    bar.replaceChildren(...shown.map((s) => el("span", { class: `bar c-${s}`, title: `${s}: ${batch.counts[s]}`,
      style: { width: `${(batch.counts[s] / Math.max(1, batch.count)) * 100}%` } })));
    bar.setAttribute("aria-label", `counts by state: ${shown.map((s) => `${s} ${batch.counts[s]}`).join(", ")}`);
    chips.replaceChildren(...shown.map((s) => el("span", { class: `state s-${s}`, "data-state": s,
      "data-count": String(batch.counts[s]), text: `${s.replaceAll("_", " ")} ${batch.counts[s]}` })));
    cancel.hidden = batch.done;
    if (batch.done) confirmBox.hidden = true;
    // Keyboard users keep their place: the link that had focus has it again after the redraw.
    const focused = document.activeElement?.closest?.("tr")?.dataset.id;
    body.replaceChildren(...rows.map(({ inv, index }) => el("tr", { "data-id": inv.id, "data-state": inv.state },
      el("td", { class: "num", text: String(index) }),
      el("td", {}, el("a", { href: `#/invocations/${encodeURIComponent(inv.id)}`, text: inv.id })),
      el("td", {}, el("span", { class: `state s-${inv.state}`, text: inv.state })),
      el("td", { text: seconds(inv.durations.time_to_start) }),
      el("td", { text: seconds(inv.durations.total) }))));
    if (focused) body.querySelector(`tr[data-id="${CSS.escape(focused)}"] a`)?.focus();
    more.hidden = !next;
    status.textContent = rows.length ? `${rows.length} of ${batch.count} shown` : "No invocations.";
  }

  async function load() {
    const rows = [];
    for (const cursor of pages) {
      const page = await api(path(cursor), { signal: gone.signal });
      batch = page;  // the counts of the last read: the newest
      // Pages in input order: an item's place in the batch is its place in the pages.
      const first = rows.length;
      rows.push(...page.items.map((inv, i) => ({ inv, index: first + i })));
      next = page.next_cursor;
    }
    draw(rows);
    if (batch.done) { closeEvents(); watched = ""; return; }  // nothing of it changes again
    follow(rows.map((r) => r.inv.id));
  }

  function refresh() {
    if (refreshing) { again = true; return; }
    refreshing = load().catch((e) => {
      if (e.name === "AbortError") return;
      error.textContent = e.message;
      if (e.status === 401) throw e;
    }).finally(() => {
      refreshing = null;
      if (again) { again = false; timer = setTimeout(refresh, REFRESH_MS); }
    });
  }

  // The leader hears every change itself; a follower is told only of the ids it watches (the
  // rows shown, at most 200: its counts move as those do, or at the next change it hears).
  function follow(ids) {
    const key = session.role === "follower" ? ids.slice(0, 200).join(",") : "";
    if (key === watched) return;
    watched = key;
    closeEvents();
    closeEvents = events(key ? key.split(",") : [], () => refresh());
  }

  cancel.addEventListener("click", () => {
    const left = batch.count - batch.ended;
    confirmText.textContent = `Cancel the ${left} invocation${left === 1 ? "" : "s"} of this batch that ${left === 1 ? "has" : "have"} not ended?`;
    confirmBox.hidden = false;
    confirmNo.focus();  // the safe answer first
  });
  confirmNo.addEventListener("click", () => { confirmBox.hidden = true; cancel.focus(); });
  confirmYes.addEventListener("click", async () => {
    error.textContent = "";
    confirmYes.disabled = true;
    try {
      await api(`/v1/batches/${encodeURIComponent(id)}:cancel`, { method: "POST" });
      confirmBox.hidden = true;
      refresh();
    } catch (e) {
      error.textContent = e.message;
      if (e.status === 401) throw e;
    } finally {
      confirmYes.disabled = false;
    }
  });
  more.addEventListener("click", () => { pages.push(next); refresh(); });
  refresh();
  return () => { gone.abort(); closeEvents(); clearTimeout(timer); };
}
