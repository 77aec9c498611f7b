// Each version's geometry drawn in SVG: lon/lat projected into a common box (all
// versions share it, so a moved vertex shows), the previous version dashed beneath.
import { h, s } from "./dom.js";

const SIZE = 180;
const PAD = 10;

function* positions(geometry) {
  if (!geometry) return;
  const walk = function* (c) {
    if (typeof c[0] === "number") yield c;
    else for (const x of c) yield* walk(x);
  };
  if (geometry.type === "GeometryCollection") {
    for (const g of geometry.geometries || []) yield* positions(g);
  } else if (geometry.coordinates) {
    yield* walk(geometry.coordinates);
  }
}

export function projection(geometries) {
  let [x0, y0, x1, y1] = [Infinity, Infinity, -Infinity, -Infinity];
  for (const g of geometries) {
    for (const [x, y] of positions(g)) {
      x0 = Math.min(x0, x);
      x1 = Math.max(x1, x);
      y0 = Math.min(y0, y);
      y1 = Math.max(y1, y);
    }
  }
  if (!Number.isFinite(x0)) return null;
  const k = Math.cos((((y0 + y1) / 2) * Math.PI) / 180) || 1; // metres per degree east vs north
  const w = Math.max((x1 - x0) * k, 1e-12);
  const hgt = Math.max(y1 - y0, 1e-12);
  const scale = (SIZE - 2 * PAD) / Math.max(w, hgt);
  const ox = PAD + (SIZE - 2 * PAD - w * scale) / 2;
  const oy = PAD + (SIZE - 2 * PAD - hgt * scale) / 2;
  return ([x, y]) => [ox + (x - x0) * k * scale, oy + (y1 - y) * scale];
}

function ring(project, coords) {
  return coords.map((p, i) => `${i ? "L" : "M"}${project(p).map((v) => v.toFixed(2)).join(" ")}`).join(" ") + " Z";
}

function shapes(project, g, attrs) {
  if (!g) return [];
  switch (g.type) {
    case "Polygon":
      return [s("path", { d: g.coordinates.map((r) => ring(project, r)).join(" "), "fill-rule": "evenodd", ...attrs })];
    case "MultiPolygon":
      return [s("path", { d: g.coordinates.flatMap((p) => p.map((r) => ring(project, r))).join(" "), "fill-rule": "evenodd", ...attrs })];
    case "LineString":
      return [s("polyline", { points: g.coordinates.map((p) => project(p).join(",")).join(" "), fill: "none", ...attrs, "fill-opacity": 0 })];
    case "MultiLineString":
      return g.coordinates.map((l) => s("polyline", { points: l.map((p) => project(p).join(",")).join(" "), fill: "none", ...attrs, "fill-opacity": 0 }));
    case "Point":
      return [s("circle", { cx: project(g.coordinates)[0], cy: project(g.coordinates)[1], r: 4, ...attrs })];
    case "MultiPoint":
      return g.coordinates.map((p) => s("circle", { cx: project(p)[0], cy: project(p)[1], r: 4, ...attrs }));
    case "GeometryCollection":
      return (g.geometries || []).flatMap((x) => shapes(project, x, attrs));
    default:
      return [];
  }
}

export function geometryPanels(versions) {
  const geoms = versions.map((v) => v.geometry).filter(Boolean);
  const project = projection(geoms);
  if (!project) return null;
  const panels = versions.map((v, i) => {
    const prev = i > 0 ? versions[i - 1].geometry : null;
    const svg = s(
      "svg",
      { viewBox: `0 0 ${SIZE} ${SIZE}`, role: "img", class: "geometry", "aria-label": `geometry of version ${i + 1}` },
      shapes(project, prev, { fill: "none", stroke: "#8c959f", "stroke-dasharray": "3 2" }),
      shapes(project, v.geometry, { fill: "#2f6fb1", "fill-opacity": 0.35, stroke: "#0b3a66", "stroke-width": 1.5 }),
    );
    const caption = v.geometry ? `v${i + 1} ${v.geometry.type}${v.retracted_at ? " (retracted)" : ""}` : `v${i + 1}: no geometry`;
    return h("figure", {}, svg, h("figcaption", {}, caption));
  });
  return h("div", { class: "geoms", id: "geometries" }, panels);
}
