// Destination: outcome counts, unresolved records with their evidence, live lag,
// rebuild progress and the last reconcile's findings; a key's guard reason on demand.
import { getJSON, seg } from "./api.js";
import { lagText } from "./board.js";
import { entityLink, facts, h, main, section, setTitle, table, timeEl, to } from "./dom.js";

const pretty = (value) => h("pre", { class: "attrs" }, JSON.stringify(value, null, 2));

function generic(value) {
  if (value === null || value === undefined) return h("p", { class: "muted" }, "none");
  if (Array.isArray(value)) {
    if (!value.length) return h("p", { class: "muted" }, "none");
    if (typeof value[0] === "object" && value[0] !== null) {
      const names = [...new Set(value.flatMap((v) => Object.keys(v)))];
      return table(
        names.map((n) => ({ label: n, cls: "attrs", cell: (r) => (typeof r[n] === "object" && r[n] !== null ? JSON.stringify(r[n]) : String(r[n] ?? "")) })),
        value,
      );
    }
    return h("p", {}, value.join(", "));
  }
  if (typeof value === "object") {
    return facts(Object.entries(value).map(([k, v]) => [k, typeof v === "object" && v !== null ? JSON.stringify(v) : String(v)]));
  }
  return h("p", {}, String(value));
}

// each manifest's rebuild: its checkpoint's last key attempted against the last one the
// destination acknowledged (equal once caught up), how many keys were judged, and where
// an unfinished one resumes
function rebuilds(list) {
  if (!list.length) return h("p", { class: "muted" }, "No rebuild yet.");
  const point = (r) => r.checkpoint || {};
  const key = (k) => (k === null || k === undefined ? "—" : typeof k === "object" ? JSON.stringify(k) : String(k));
  return table(
    [
      { label: "manifest", cell: (r) => r.manifest },
      { label: "status", cell: (r) => point(r).status || "not started" },
      { label: "judged / population", num: true, cell: (r) => `${r.judged ?? 0} / ${r.population ?? "?"}` },
      { label: "batches", num: true, cell: (r) => String(point(r).batches ?? 0) },
      { label: "last key attempted", cls: "mono", cell: (r) => key(point(r).attempted_key) },
      { label: "last key acknowledged", cls: "mono", cell: (r) => key(point(r).acknowledged_key) },
      { label: "caught up", cell: (r) => (point(r).status ? (key(point(r).attempted_key) === key(point(r).acknowledged_key) ? "yes" : "no: some sent, not acknowledged") : "—") },
      { label: "resumes at", cell: (r) => (r.resume ? `batch ${r.resume.batch} of ${r.resume.batches} (${r.resume.keys_done} of ${r.resume.population} keys acknowledged)` : "—") },
    ],
    list,
    { id: "rebuilds" },
  );
}

export async function render(params) {
  const name = params.name;
  setTitle(`Destination ${name}`);
  const d = await getJSON(`/api/destinations/${seg(name)}`);
  const source = d.source;
  const scopes = Object.entries(d.outcomes || {});
  const verdicts = [...new Set(scopes.flatMap(([, counts]) => Object.keys(counts)))].sort();
  main().append(
    facts([
      ["source", source ? h("a", { href: to(`/sources/${seg(source)}`) }, source) : "—"],
      ["table", (d.declaration && d.declaration.table) || "—"],
      ["live lag", d.lag ? lagText(d.lag) : "no live route yet"],
      ["oldest undelivered change", d.lag && d.lag.oldest_pending_at ? timeEl(d.lag.oldest_pending_at) : "—"],
      ["JSON", h("a", { href: to(`/api/destinations/${seg(name)}`) }, `/api/destinations/${name}`)],
    ]),
    section(
      "Outcomes",
      scopes.length && verdicts.length
        ? table(
            [{ label: "route", cell: ([scope]) => scope }, ...verdicts.map((v) => ({ label: v, num: true, cell: ([, counts]) => String(counts[v] || 0) }))],
            scopes,
            { id: "outcomes" },
          )
        : h("p", { class: "muted" }, "No verdicts yet."),
    ),
  );
  const unresolved = d.unresolved || [];
  main().append(
    section(
      "Unresolved records (held, with their evidence)",
      unresolved.length
        ? table(
            [
              { label: "key", cell: (u) => (source ? entityLink(source, u.key) : String(u.key)) },
              { label: "route", cell: (u) => u.scope || "" },
              { label: "revision", cell: (u) => String(u.revision ?? "") },
              { label: "generation", cell: (u) => String(u.generation ?? "") },
              { label: "reason", cell: (u) => u.reason || "" },
              { label: "evidence", cls: "attrs", cell: (u) => JSON.stringify(u.evidence ?? null) },
            ],
            unresolved,
            { id: "unresolved" },
          )
        : h("p", { class: "muted" }, "No unresolved records."),
    ),
    section("Rebuild progress (attempted vs acknowledged)", rebuilds(d.rebuilds || [])),
    section(
      "Last reconcile",
      d.last_reconcile ? generic(d.last_reconcile) : h("p", { class: "muted" }, "No reconcile report is kept: `feedledger reconcile DEST --manifest NAME` shows one."),
    ),
  );
  const out = h("div", {});
  const input = h("input", { type: "text", id: "guard-key", name: "key", placeholder: "a key" });
  const form = h(
    "form",
    {
      class: "inline",
      onsubmit: async (event) => {
        event.preventDefault();
        try {
          out.replaceChildren(pretty(await getJSON(`/api/destinations/${seg(name)}/keys/${seg(input.value)}`)));
        } catch (error) {
          out.replaceChildren(h("p", { class: "error" }, error.message));
        }
      },
    },
    h("label", { for: "guard-key" }, "Why does it hold what it holds for"),
    input,
    h("button", { type: "submit" }, "Explain"),
  );
  main().append(section("The guard's reason for a key", form, out));
}
