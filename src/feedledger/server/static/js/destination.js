// Destination: outcome counts, unresolved records with their evidence, live lag,
// rebuild progress and the last reconcile's findings; a key's guard reason on demand.
import { getJSON, seg } from "./api.js";
import { lagText } from "./board.js";
import { cards, entityLink, facts, h, main, section, setTitle, table, timeEl } from "./dom.js";

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

export async function render(params) {
  const name = params.name;
  setTitle(`Destination ${name}`);
  const d = await getJSON(`/api/destinations/${seg(name)}`);
  const source = d.source || (d.destination && d.destination.source);
  const outcomes = d.outcomes || d.outcome_counts || {};
  main().append(
    facts([
      ["source", source ? h("a", { href: `/sources/${seg(source)}` }, source) : "—"],
      ["live lag", d.lag || d.live_lag ? lagText(d.lag || d.live_lag) : "—"],
      ["JSON", h("a", { href: `/api/destinations/${seg(name)}` }, `/api/destinations/${name}`)],
    ]),
    section("Outcomes", Object.keys(outcomes).length ? cards(Object.entries(outcomes)) : h("p", { class: "muted" }, "No verdicts yet.")),
  );
  const unresolved = d.unresolved || [];
  main().append(
    section(
      "Unresolved records (held, with their evidence)",
      unresolved.length
        ? table(
            [
              { label: "key", cell: (u) => (source ? entityLink(source, u.key) : String(u.key)) },
              { label: "route", cell: (u) => u.route || "" },
              { label: "when", cell: (u) => timeEl(u.at || u.decided_at) },
              { label: "reason", cell: (u) => u.reason || "" },
              { label: "evidence", cls: "attrs", cell: (u) => JSON.stringify(u.evidence ?? u) },
            ],
            unresolved,
            { id: "unresolved" },
          )
        : h("p", { class: "muted" }, "No unresolved records."),
    ),
    section("Rebuild progress", generic(d.rebuild ?? d.rebuilds ?? null)),
    section("Last reconcile", generic(d.reconcile ?? d.last_reconcile ?? null)),
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
