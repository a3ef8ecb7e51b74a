/* The parts of the drift and replay SVG charts (window.LTMChart): the
 * frame, labels, lines, bars, legend keys. The element builders (LTM.h,
 * LTM.svg), texts and the API are runtime.js's (window.LTM).
 *
 * Loaded after runtime.js and before drift.js and replay.js. Colours stay in
 * each panel's CSS classes, which use style.css's theme variables, so the
 * light and dark themes both hold. Text only ever reaches the page through
 * text nodes.
 */
(function () {
  "use strict";

  const svg = window.LTM.svg;

  // -- chart parts -------------------------------------------------------------------

  /** The chart's root: width × height user units, scaled by CSS; an image named ``label``. */
  function frame(width, height, label, attrs) {
    return svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": label, ...attrs });
  }

  /** Text at (x, y); ``anchor`` "end" or "middle" aligns it there. */
  function label(x, y, cls, text, anchor) {
    return svg("text", { x: x, y: y, class: cls, "text-anchor": anchor || null }, text);
  }

  /** A horizontal line across the plot, at height y. */
  function hline(x1, x2, y, cls, attrs) {
    return svg("line", { x1: x1, x2: x2, y1: y, y2: y, class: cls, ...attrs });
  }

  function bar(x, y, width, height, cls, attrs) {
    return svg("rect", { x: x, y: y, width: width, height: height, class: cls, ...attrs });
  }

  /** A legend entry inside the chart: a small swatch and its text, from (x, baseline y). */
  function key(x, y, cls, text, textCls) {
    return [bar(x, y - 10, 12, 10, cls), label(x + 18, y, textCls, text)];
  }

  window.LTMChart = { frame, label, hline, bar, key };
})();
