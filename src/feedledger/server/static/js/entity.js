// Entity: the bitemporal picture (SVG), each version's geometry for a GIS source, and
// the history table with every attribute value in full.
import { getJSON, seg } from "./api.js";
import { geometryPanels } from "./geometry.js";
import { h, main, runLink, section, setTitle, table, timeEl, to } from "./dom.js";
import { timeline } from "./timeline.js";

function attributes(v, prev) {
  if (v.deleted || !v.attributes) return h("span", { class: "muted" }, "deleted (tombstone)");
  const before = (prev && prev.attributes) || {};
  const items = Object.entries(v.attributes).map(([name, value]) => {
    const changed = prev && JSON.stringify(before[name]) !== JSON.stringify(value);
    return h("li", { class: changed ? "diff-field" : "" }, `${name}: ${JSON.stringify(value)}`);
  });
  if (v.geometry !== undefined) {
    const moved = prev && JSON.stringify(prev.geometry) !== JSON.stringify(v.geometry);
    const g = v.geometry;
    items.push(h("li", { class: moved ? "diff-field" : "" }, `geometry: ${g ? g.type : "none"}${moved ? " (changed)" : ""}`));
  }
  return h("ul", { class: "kv" }, items);
}

export async function render(params) {
  const source = params.source;
  const key = params.key;
  const query = new URLSearchParams(location.search);
  const knownAt = query.get("known_at") || "";
  const valid = query.get("valid") || "";
  setTitle(`${source} · ${key}`);
  const base = `/api/sources/${seg(source)}/entities/${seg(key)}`;
  const [versions, src] = await Promise.all([
    getJSON(`${base}/history`, { known_at: knownAt, all: "true" }),
    getJSON(`/api/sources/${seg(source)}`),
  ]);
  const form = h(
    "form",
    { class: "inline", method: "get", action: location.pathname },
    h("label", { for: "valid" }, "Valid at"),
    h("input", { type: "text", id: "valid", name: "valid", value: valid, placeholder: "YYYY-MM-DD", size: 12 }),
    h("label", { for: "known_at" }, "as known at"),
    h("input", { type: "text", id: "known_at", name: "known_at", value: knownAt, placeholder: "YYYY-MM-DD or ISO-8601" }),
    h("button", { type: "submit" }, "Show"),
    knownAt ? h("a", { href: location.pathname }, "latest belief") : null,
    h("a", { href: to(`${base}/history?all=true${knownAt ? `&known_at=${encodeURIComponent(knownAt)}` : ""}`) }, "JSON"),
  );
  main().append(h("p", {}, "Source ", h("a", { href: to(`/sources/${seg(source)}`) }, source), `: ${versions.length} versions (retracted ones included, hatched).`), form);
  if (valid) main().append(await asof(base, valid, knownAt));
  if (!versions.length) {
    main().append(h("p", { class: "muted" }, "No versions of this key are known."));
    return;
  }
  main().append(
    h("figure", {}, timeline(versions, src.gaps || [], knownAt || null, src.timezone || "UTC"), h("figcaption", {}, `Valid time across (days in ${src.timezone || "UTC"}), transaction time up; shaded bands are gaps (not observed); hatched rectangles are retracted versions.`)),
  );
  const geo = versions.some((v) => v.geometry) ? geometryPanels(versions) : null;
  if (geo) main().append(section("Geometry of each version (previous one dashed)", geo));
  const previous = (i) => {
    for (let j = i - 1; j >= 0; j--) if (!versions[j].retracted_at) return versions[j];
    return null;
  };
  const rows = versions.map((v, i) => ({ v, i, prev: previous(i) }));
  const t = table(
    [
      { label: "#", cell: (r) => `v${r.i + 1}` },
      { label: "valid from", cell: (r) => timeEl(r.v.valid_from) },
      { label: "valid to", cell: (r) => (r.v.valid_to ? timeEl(r.v.valid_to) : "—") },
      { label: "recorded", cell: (r) => timeEl(r.v.recorded_at) },
      { label: "retracted", cell: (r) => (r.v.retracted_at ? timeEl(r.v.retracted_at) : "—") },
      { label: "run", cell: (r) => runLink(r.v.run_id) },
      { label: "backfill", cell: (r) => (r.v.backfill ? "yes" : "") },
      { label: "attributes (changed ones highlighted)", cls: "attrs", cell: (r) => attributes(r.v, r.prev) },
    ],
    rows,
    { id: "history", class: "diff" },
  );
  t.querySelectorAll("tbody tr").forEach((tr, i) => {
    tr.id = `version-${i + 1}`;
    tr.tabIndex = -1;
  });
  main().append(section("History", t));
}

// the as-of answer: present / absent / not_observed (inside a gap) / not_known
async function asof(base, valid, knownAt) {
  const a = await getJSON(`${base}/asof`, { valid, known_at: knownAt });
  const v = a.version || a.last_observed;
  const shown = v && v.attributes ? Object.entries(v.attributes).map(([k, x]) => `${k}: ${JSON.stringify(x)}`).join("\n") : "";
  const what = {
    present: "present",
    absent: "absent (deleted, or not yet seen)",
    not_observed: a.gap ? "not observed: the day is inside a gap" : "not observed: before the source's first observation",
    not_known: "not known: nothing of the source was recorded yet at that time",
  }[a.status] || a.status;
  return section(
    `As of ${valid}${knownAt ? `, as known at ${knownAt}` : ""}`,
    h("p", { id: "asof-status" }, h("strong", {}, what), a.status === "not_observed" ? ` (${a.gap ? `${a.gap.reason}; ` : ""}last observed ${a.last_observed_at || "never"}, next ${a.next_observed_at || "not yet"})` : ""),
    shown ? h("pre", { class: "attrs", id: "asof-version" }, a.version ? shown : `last observed:\n${shown}`) : "",
  );
}
