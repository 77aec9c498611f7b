// Source: its facts, the publication calendar (one cell per expected publication day,
// each linked to its run), gaps, the runs list and the writes made on it (audit).
import { getJSON, seg } from "./api.js";
import { badge, sourceStatus } from "./board.js";
import { facts, h, main, runLink, section, setTitle, table, timeEl, to } from "./dom.js";

const STATES = {
  live: "applied live",
  backfill: "applied by backfill",
  held: "held for review",
  retracted: "retracted",
  gap: "gap: not observed",
  late: "late: archived after newer data, never applied",
  waiting: "archived, waiting to be applied",
  missed: "missed: nothing archived",
};

function cell(day) {
  const label = `${day.day}: ${STATES[day.state]}${day.expected ? "" : " (not on the cadence)"}${day.gap_reason ? ` (${day.gap_reason})` : ""}`;
  const attrs = {
    class: `cal-cell ${day.state}${day.expected ? "" : " unexpected"}`,
    title: label,
    "aria-label": label,
    dataset: { day: day.day, state: day.state, run: day.run_id || "" },
  };
  const text = String(Number(day.day.slice(8, 10)));
  return day.run_id ? h("a", { ...attrs, href: to(`/runs/${seg(day.run_id)}`) }, text) : h("span", { ...attrs, role: "img" }, text);
}

export function calendarView(cal) {
  const out = h("div", { class: "calendar", id: "calendar" });
  let month = "";
  for (const day of cal.days) {
    if (day.day.slice(0, 7) !== month) {
      month = day.day.slice(0, 7);
      out.append(h("div", { class: "month" }, month));
    }
    out.append(cell(day));
  }
  const counts = {};
  for (const day of cal.days) counts[day.state] = (counts[day.state] || 0) + 1;
  const legend = h(
    "ul",
    { class: "legend", "aria-label": "Legend" },
    Object.entries(STATES).map(([state, text]) => h("li", {}, h("span", { class: `cal-cell ${state}`, "aria-hidden": "true" }), `${text} (${counts[state] || 0})`)),
  );
  return [legend, out];
}

export async function render(params) {
  const name = params.source;
  setTitle(`Source ${name}`);
  const [src, cal] = await Promise.all([
    getJSON(`/api/sources/${seg(name)}`),
    getJSON(`/api/sources/${seg(name)}/calendar`),
  ]);
  const runs = runsSection(name);
  const health = src.health || {};
  const decl = src.declaration || {};
  main().append(
    facts([
      ["status", health.source ? badge(sourceStatus(health)) : "—"],
      ["key", (decl.key || []).join(", ")],
      ["format / kind", `${decl.format || "?"} / ${decl.kind || "?"}`],
      ["cadence / timezone", `${src.cadence} / ${src.timezone}`],
      ["watermark", src.watermark && src.watermark.published_at ? timeEl(src.watermark.published_at) : "nothing applied"],
      ["last fetch", timeEl(health.last_successful_fetch)],
      ["publications missed", String(health.missed_publications ?? 0)],
      ["frozen", src.frozen ? `yes${decl.freeze_reason ? `: ${decl.freeze_reason}` : ""}` : "no"],
      ["JSON", h("a", { href: to(`/api/sources/${seg(name)}`) }, `/api/sources/${name}`)],
    ]),
    section(`Publication calendar ${cal.start} to ${cal.end}`, calendarView(cal)),
    section(
      "Gaps (not observed)",
      src.gaps.length
        ? table(
            [
              { label: "from", cell: (g) => timeEl(g.start_at || g.start) },
              { label: "to (exclusive)", cell: (g) => timeEl(g.end_at || g.end) },
              { label: "reason", cell: (g) => g.reason },
              { label: "run", cell: (g) => runLink(g.run_id) },
            ],
            src.gaps,
            { id: "gaps" },
          )
        : h("p", { class: "muted" }, "No gaps."),
    ),
    runs,
    section(
      "Writes on this source (audit)",
      (src.audit || []).length
        ? table(
            [
              { label: "when", cell: (a) => timeEl(a.at) },
              { label: "who", cell: (a) => a.actor },
              { label: "what", cell: (a) => a.action },
              { label: "run", cell: (a) => runLink(a.run_id) },
              { label: "detail", cls: "attrs", cell: (a) => (a.detail === null ? "" : JSON.stringify(a.detail)) },
            ],
            src.audit,
            { id: "source-audit" },
          )
        : h("p", { class: "muted" }, "No writes over the HTTP API."),
    ),
  );
  await runs.ready;
}

// a run's status cell: how it ended; a run whose writes were all retracted shows
// `retracted` (when, by which run), one partly retracted (a replay) says so
function runState(r) {
  const by = (r.retracted_by || []).map((id) => runLink(id));
  const sep = (items) => items.flatMap((x, i) => (i ? [", ", x] : [x]));
  if (r.retracted_at) {
    return h("span", { class: "run-retracted" }, badge("retracted"), " ", timeEl(r.retracted_at), by.length ? " by " : "", ...sep(by), ` (${r.status})`);
  }
  const shown = ["held", "retracted", "failed"].includes(r.status) ? badge(r.status) : r.status;
  return by.length ? h("span", {}, shown, "; partly retracted by ", ...sep(by)) : shown;
}

// the source's runs, newest first, a page at a time (the API's opaque cursor)
function runsSection(name) {
  const body = h("tbody", {});
  const more = h("button", { type: "button", id: "more-runs" }, "more runs");
  const columns = [
    (r) => runLink(r.run_id),
    (r) => r.kind,
    (r) => runState(r),
    (r) => timeEl(r.started_at),
    (r) => String(r.payloads),
    (r) => String(r.changes),
    (r) => r.error || "",
  ];
  const heads = ["run", "kind", "status", "started", "payloads", "changes", "error"];
  let cursor = null;
  const load = async () => {
    more.disabled = true;
    const page = await getJSON("/api/runs", { source: name, limit: 25, cursor });
    for (const r of page.runs) {
      body.append(h("tr", {}, columns.map((cell, i) => h("td", { class: i === 4 || i === 5 ? "num" : null }, cell(r)))));
    }
    cursor = page.next_cursor;
    more.hidden = !cursor;
    more.disabled = false;
  };
  more.addEventListener("click", load);
  const t = h(
    "table",
    { id: "runs" },
    h("thead", {}, h("tr", {}, heads.map((x, i) => h("th", { scope: "col", class: i === 4 || i === 5 ? "num" : null }, x)))),
    body,
  );
  const out = section("Runs (newest first)", t, h("p", {}, more, " ", h("a", { href: to(`/api/runs?source=${seg(name)}`) }, "JSON")));
  out.ready = load();
  return out;
}
