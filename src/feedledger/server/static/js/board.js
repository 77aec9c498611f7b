// Board: every source with its status, stale first; then the destinations.
import { getJSON } from "./api.js";
import { ago, h, main, section, table, timeEl, to } from "./dom.js";

// the status shown, most urgent first; the board lists stale sources first
// ("misdated": the publisher's date is ahead of the clock or went back, health fails)
const RANK = ["failing", "misdated", "stale", "held", "recovering", "frozen", "fresh"];

export function sourceStatus(s) {
  const schedule = s.schedule || {};
  if (s.frozen) return "frozen";
  if (s.publisher_date_problem) return "misdated";
  if (schedule.failures > 0 && schedule.last_outcome === "failed") return "failing";
  if (s.held_runs > 0 || schedule.last_outcome === "held") return "held";
  const busy = s.lease && s.lease.state && s.lease.state !== "free";
  if ((busy && s.missed_publications > 0) || ["waiting", "interrupted"].includes(schedule.last_outcome)) {
    return "recovering";
  }
  return s.stale ? "stale" : "fresh";
}

export function badge(text) {
  return h("span", { class: `badge ${text}` }, text);
}

// `first`: the /api/health request app.js already began (if it did)
export async function render(params, flags, first) {
  const health = await (first || getJSON("/api/health"));
  const rows = health.sources.map((s) => ({ ...s, shown: sourceStatus(s) }));
  rows.sort(
    (a, b) =>
      Number(b.stale) - Number(a.stale) ||
      RANK.indexOf(a.shown) - RANK.indexOf(b.shown) ||
      a.source.localeCompare(b.source),
  );
  const undelivered = (s) => {
    const n = s.notifications || {};
    return (n.pending || 0) + (n.failed || 0) + (n.dead || 0);
  };
  const stale = rows.filter((r) => r.stale).length;
  main().append(
    h("p", {}, `${rows.length} sources, ${stale} stale. `, h("a", { href: to("/api/health") }, "JSON")),
    table(
      [
        { label: "source", cell: (r) => h("a", { href: to(`/sources/${encodeURIComponent(r.source)}`) }, r.source) },
        { label: "status", cell: (r) => badge(r.shown) },
        { label: "cadence", cell: (r) => r.cadence },
        { label: "last publisher date", cell: (r) => timeEl(r.last_publisher_date) },
        { label: "last fetch", cell: (r) => (r.last_successful_fetch ? [timeEl(r.last_successful_fetch), ` (${ago(r.last_successful_fetch)} ago)`] : "—") },
        { label: "publications missed", num: true, cell: (r) => String(r.missed_publications ?? 0) },
        { label: "held runs", num: true, cell: (r) => String(r.held_runs || 0) },
        { label: "undelivered messages", num: true, cell: (r) => String(undelivered(r)) },
        { label: "last error", cell: (r) => r.publisher_date_problem || (r.schedule && r.schedule.last_error) || "" },
      ],
      rows,
      { id: "board", "aria-label": "Sources" },
    ),
  );
  if (health.destinations && health.destinations.length) {
    main().append(
      section(
        "Destinations",
        table(
          [
            { label: "destination", cell: (d) => h("a", { href: to(`/destinations/${encodeURIComponent(d.destination)}`) }, d.destination) },
            { label: "source", cell: (d) => h("a", { href: to(`/sources/${encodeURIComponent(d.source)}`) }, d.source) },
            { label: "live lag", cell: (d) => lagText(d) },
          ],
          health.destinations,
        ),
      ),
    );
  }
}

export function lagText(d) {
  if (!d) return "—";
  const behind = `${d.changes_behind ?? 0} changes in ${d.messages_behind ?? 0} messages behind`;
  const paused = d.paused ? " (paused: maintenance rebuild)" : "";
  return `${Number(d.lag_s || 0).toFixed(1)} s; ${behind}${paused}`;
}
