// Review: runs held for an unusual burst, each with release / retract buttons. Shown
// only when the server has a write token configured; the token typed here is kept in
// this page's memory only (api.js), never stored.
import { getJSON, hasToken, postJSON, seg, setToken } from "./api.js";
import { h, main, runLink, section, setTitle, table, timeEl, to } from "./dom.js";

export async function render(params, flags) {
  setTitle("Review held bursts");
  const server = await flags;
  if (!server.writes) {
    main().append(h("p", {}, "This server is read-only: start it with --token-env VAR (VAR set) to release or retract held runs here; `feedledger review RUN_ID --release|--retract` works at a shell."));
    return;
  }
  const secret = h("input", { type: "password", id: "token", name: "token", autocomplete: "off", required: true });
  const tokenForm = h(
    "form",
    {
      class: "inline",
      id: "token-form",
      onsubmit: (event) => {
        event.preventDefault();
        setToken(secret.value);
        secret.value = "";
        tokenState.textContent = hasToken() ? "Token set for this page (in memory only; reloading forgets it)." : "";
        refresh();
      },
    },
    h("label", { for: "token" }, "Write token"),
    secret,
    h("button", { type: "submit" }, "Use token"),
  );
  const tokenState = h(
    "p",
    { class: "muted", role: "status", id: "token-state" },
    "Give a write token to enable Release / Retract; it is kept in this page's memory only.",
  );
  const result = h("p", { role: "status", id: "review-result" });
  const box = h("div", { id: "held" });
  main().append(tokenForm, tokenState, result, section("Held runs", box));

  const decide = async (run, action, button) => {
    if (action === "retract" && !confirm(`Retract run ${run.run_id.slice(0, 8)} of ${run.source}? Its versions are retracted and its notifications never go out.`)) return;
    button.disabled = true;
    try {
      const answer = await postJSON(`/api/runs/${seg(run.run_id)}/review`, { action });
      const done = answer.result || answer;
      const who = answer.audit ? ` (recorded: ${answer.audit.actor}, ${answer.audit.at})` : "";
      const sent = done.notifications ? `, ${done.notifications} notifications sent on` : "";
      const cancelled = done.notifications_cancelled ? `, ${done.notifications_cancelled} notifications cancelled` : "";
      await refresh();
      result.className = "ok";
      result.textContent = `Run ${run.run_id.slice(0, 8)} ${done.action || action}${sent}${cancelled}${who}.`;
    } catch (error) {
      result.className = "error";
      result.textContent = error.status === 401 ? `Refused: ${error.message}. Enter a valid token above.` : error.message;
      button.disabled = false;
    }
  };

  // refreshes may overlap (a token given, a decision made): only the latest one asked
  // renders, never an older answer that still lists a run released since
  let asked = 0;
  async function refresh() {
    const mine = ++asked;
    const page = await getJSON("/api/runs", { status: "held", limit: 200 });
    if (mine !== asked) return;
    const runs = page.runs;
    if (!runs.length) {
      box.replaceChildren(h("p", { class: "muted", id: "none-held" }, "No run is held for review."));
      return;
    }
    box.replaceChildren(
      table(
        [
          { label: "run", cell: (r) => runLink(r.run_id) },
          { label: "source", cell: (r) => h("a", { href: to(`/sources/${seg(r.source)}`) }, r.source) },
          { label: "started", cell: (r) => timeEl(r.started_at) },
          { label: "changes", num: true, cell: (r) => String(r.changes) },
          {
            label: "decision",
            cell: (r) => {
              const release = h("button", { type: "button", class: "primary", disabled: !hasToken(), "data-action": "release", "data-run": r.run_id }, "Release");
              const retract = h("button", { type: "button", class: "danger", disabled: !hasToken(), "data-action": "retract", "data-run": r.run_id }, "Retract");
              release.addEventListener("click", () => decide(r, "release", release));
              retract.addEventListener("click", () => decide(r, "retract", retract));
              return [release, " ", retract];
            },
          },
        ],
        runs,
        { id: "held-runs" },
      ),
    );
  }
  await refresh();
}
