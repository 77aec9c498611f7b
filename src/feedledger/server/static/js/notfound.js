// Not found: the address names no page of the dashboard, or a source, run or
// destination there is none of (the server answers 404, with the reason).
import { h, main, setTitle, to } from "./dom.js";

export async function render(params) {
  setTitle("Not found");
  main().append(
    h("p", { id: "not-found" }, "There is no page at ", h("code", {}, params.path || location.pathname), params.reason ? `: ${params.reason}` : "."),
    h("p", {}, "Start from the ", h("a", { href: to("/") }, "board"), ", or see the ", h("a", { href: to("/docs") }, "API"), "."),
  );
}
