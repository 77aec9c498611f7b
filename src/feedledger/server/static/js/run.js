// Run: its counts, retraction state, notices and their delivery, the writes made on
// it, and its changes a page at a time with before/after differences highlighted.
import { getJSON, seg } from "./api.js";
import { badge } from "./board.js";
import { cards, entityLink, facts, h, main, runLink, section, setTitle, table, timeEl, to } from "./dom.js";

function fieldsDiff(before, after) {
  const names = [...new Set([...Object.keys(before || {}), ...Object.keys(after || {})])];
  const side = (obj, other, cls) =>
    obj
      ? h(
          "ul",
          { class: "kv" },
          names
            .filter((n) => n in obj)
            .map((n) => {
              const differs = !other || JSON.stringify(obj[n]) !== JSON.stringify(other[n]);
              return h("li", { class: differs ? `diff-field ${cls}` : "" }, `${n}: ${JSON.stringify(obj[n])}`);
            }),
        )
      : h("span", { class: "muted" }, "—");
  return [side(before, after, "before"), side(after, before, "after")];
}

function changesTable(source, items) {
  return table(
    [
      { label: "key", cell: (c) => entityLink(source, c.key) },
      { label: "change", cell: (c) => c.change || badge(c.outcome || "held") },
      { label: "valid from", cell: (c) => timeEl(c.valid_from) },
      { label: "before", cls: "attrs", cell: (c) => fieldsDiff(c.before, c.after)[0] },
      { label: "after", cls: "attrs", cell: (c) => fieldsDiff(c.before, c.after)[1] },
      { label: "note", cell: (c) => note(c) },
    ],
    items,
    { id: "changes", class: "diff" },
  );
}

function note(c) {
  const parts = [];
  if (c.revision) parts.push(`revision ${c.revision}`);
  if (c.current_revision) parts.push(`held ${c.current_revision}`);
  if (c.geometry_changed === true) parts.push("geometry moved");
  return parts.join("; ");
}

export async function render(params) {
  const id = params.run;
  const run = await getJSON(`/api/runs/${seg(id)}`);
  setTitle(`Run ${run.run_id.slice(0, 8)} · ${run.source}`);
  const ended = run.status === "held" ? badge("held") : run.status;
  const state = run.retracted_at
    ? [badge("retracted"), " ", timeEl(run.retracted_at), ` (${run.status})`]
    : run.retracted
      ? [ended, "; partly retracted"]
      : ended;
  main().append(
    facts([
      ["run id", h("code", {}, run.run_id)],
      ["source", h("a", { href: to(`/sources/${seg(run.source)}`) }, run.source)],
      ["kind", run.kind],
      ["status", state],
      ["started / finished", [timeEl(run.started_at), " / ", timeEl(run.finished_at)]],
      run.parent_run_id ? ["parent run", runLink(run.parent_run_id)] : null,
      run.retracted_by && run.retracted_by.length ? ["retracted by", run.retracted_by.map((r) => [runLink(r), " "])] : null,
      run.error ? ["error", h("span", { class: "error" }, run.error)] : null,
      run.status === "held" ? ["review", h("a", { href: to("/review") }, "release or retract it on the review page")] : null,
      ["JSON", h("a", { href: to(`/api/runs/${seg(run.run_id)}`) }, `/api/runs/${run.run_id}`)],
    ]),
    cards([
      ["payloads", run.payloads],
      ["changes", run.changes],
      ["notices", (run.notices || []).length],
      ["writes", (run.audit || []).length],
    ]),
  );
  const notices = run.notices || [];
  main().append(
    section(
      "Notices and their delivery",
      notices.length
        ? table(
            [
              { label: "notice", cell: (n) => n.topic },
              { label: "status", cell: (n) => n.status },
              { label: "changes", num: true, cell: (n) => String(n.changes) },
              { label: "queued", cell: (n) => timeEl(n.created_at) },
              ...(notices.some((n) => n.delivery || n.deliveries) ? [{ label: "delivery", cell: (n) => delivery(n) }] : []),
              { label: "message", cls: "attrs", cell: (n) => (n.body && (n.body.message || n.body.summary || n.body.type)) || "" },
            ],
            notices,
            { id: "notices" },
          )
        : h("p", { class: "muted" }, "This run queued no notices."),
    ),
  );
  const audit = run.audit || [];
  main().append(
    section(
      "Writes on this run (audit)",
      audit.length
        ? table(
            [
              { label: "when", cell: (a) => timeEl(a.at) },
              { label: "who", cell: (a) => a.actor },
              { label: "what", cell: (a) => a.action },
              { label: "detail", cls: "attrs", cell: (a) => (a.detail === null ? "" : JSON.stringify(a.detail)) },
            ],
            audit,
            { id: "audit" },
          )
        : h("p", { class: "muted" }, "No writes over the HTTP API."),
    ),
  );
  const box = h("div", {});
  const pager = h("div", { class: "pager" });
  main().append(section("Changes", pager, box));
  const cursors = [null];
  let page = 0;
  const show = async () => {
    const data = await getJSON(`/api/runs/${seg(run.run_id)}/changes`, { cursor: cursors[page], limit: 100 });
    if (data.next_cursor) cursors[page + 1] = data.next_cursor;
    box.replaceChildren(
      data.changes.length ? changesTable(run.source, data.changes) : h("p", { class: "muted" }, "No changes."),
    );
    const prev = h("button", { type: "button", disabled: page === 0, onclick: () => ((page -= 1), show()) }, "← previous");
    const next = h("button", { type: "button", disabled: !data.next_cursor, onclick: () => ((page += 1), show()) }, "next →");
    pager.replaceChildren(prev, h("span", {}, `page ${page + 1} · ${data.total} in all`), next);
  };
  await show();
}

function delivery(n) {
  const d = n.delivery || n.deliveries;
  if (!d) return "";
  if (typeof d !== "object") return String(d);
  return Object.entries(d)
    .map(([k, v]) => `${k}: ${typeof v === "object" ? JSON.stringify(v) : v}`)
    .join(", ");
}
