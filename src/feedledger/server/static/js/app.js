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
  notfound: () => import("./notfound.js"),
};

// a page's first data request, begun with its module rather than after it (the shell
// preloads the modules, and this URL: pages.py's FIRST); handed to the page's render
const FIRST = {
  board: () => getJSON("/api/health"),
};

async function start() {
  const params = { ...document.body.dataset };
  const page = params.page;
  try {
    // the page's module and its data are asked for while the server's flags are
    const flags = getJSON("/api/dashboard");
    flags.then((server) => {
      document.getElementById("nav-review").hidden = !server.writes;
    }, () => {});
    const first = FIRST[page] ? FIRST[page](params) : undefined;
    if (first) first.catch(() => {}); // handled by the page; never "unhandled" meanwhile
    const module = await PAGES[page]();
    await module.render(params, flags, first);
    status("");
  } catch (error) {
    fail(error);
  }
  document.body.dataset.ready = "true"; // the browser tests wait for this
}

start();
