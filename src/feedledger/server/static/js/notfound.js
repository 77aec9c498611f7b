// Not found: the address names no page of the dashboard (the server answers 404).
import { h, main, setTitle, to } from "./dom.js";

export async function render(params) {
  setTitle("Not found");
  main().append(
    h("p", { id: "not-found" }, "There is no page at ", h("code", {}, params.path || location.pathname), "."),
    h("p", {}, "Start from the ", h("a", { href: to("/") }, "board"), ", or see the ", h("a", { href: to("/docs") }, "API"), "."),
  );
}
