// The dashboard's entry point: each page's HTML names its page (body data-page) and
// its parameters (data-source, data-key, data-run, data-name); the page's module
// fetches the JSON API and renders it.
import { getJSON } from "./api.js";
import { fail, status } from "./dom.js";

const PAGES = {
  board: () => import("./board.js"),
  source: () => import("./source.js"),
  run: () => import("./run.js"),
  entity: () => import("./entity.js"),
  destination: () => import("./destination.js"),
  review: () => import("./review.js"),
};

async function start() {
  const params = { ...document.body.dataset };
  const page = params.page;
  try {
    const server = await getJSON("/api/dashboard");
    document.getElementById("nav-review").hidden = !server.writes;
    const module = await PAGES[page]();
    await module.render(params, server);
    status("");
  } catch (error) {
    fail(error);
  }
  document.body.dataset.ready = "true"; // the browser tests wait for this
}

start();
