/*
 * The upload form's helpers (runs/new.html), a classic script:
 * - once a file is chosen, its module-level constants are read on the
 *   server (from the syntax tree, never run: POST data-constants-url) and
 *   shown as fields with the file's values (a list as [400, 800], a tuple
 *   as (3, 3)); changing one writes "name=value" into the overrides box
 *   (back to the file's value: the line goes away), so the box stays the
 *   one thing the form sends; typing in the box updates the fields the
 *   other way (a name the box no longer sets shows the file's value again);
 * - "start from an example" loads a reference model into the file input;
 *   with "CPU size" ticked (#example-cpu-size, the default while the device
 *   is cpu) its small sizes (tiny.json, #example-cpu-sizes) are written into
 *   the overrides box, and the hint says them: the files are GPU-sized;
 * - a file kept from a failed try (#kept-constants) shows its fields at once;
 * - a file over the model file limit (data-max-upload-bytes) is refused here,
 *   before it is sent (#upload-too-large, the form's own words): the server
 *   would refuse the whole request unread, and the page it answers with
 *   cannot give back what was typed.
 */
(function () {
  "use strict";
  var form = document.getElementById("run-form");
  if (!form) return;
  var fileInput = form.querySelector("input[type=file][name=upload]");
  var box = form.querySelector("textarea[name=overrides]");
  var fieldset = document.getElementById("constants");
  var holder = document.getElementById("constants-fields");
  var help = document.getElementById("constants-help");
  var example = document.getElementById("example");

  function text(v) {
    return typeof v === "boolean" ? (v ? "true" : "false") : String(v);
  }

  // the box's items: split at new lines, and at commas outside brackets
  // ("sizes=[64, 32], kernel=(3, 3)" is two items), as forms.split_overrides does
  function splitItems(value) {
    var items = [], current = "", depth = 0;
    for (var i = 0; i < value.length; i++) {
      var ch = value[i];
      if (ch === "[" || ch === "(") depth += 1;
      else if (ch === "]" || ch === ")") depth = Math.max(depth - 1, 0);
      if (ch === "\n" || (ch === "," && depth === 0)) {
        items.push(current);
        current = "";
        depth = 0;
      } else current += ch;
    }
    items.push(current);
    return items.map(function (s) { return s.trim(); }).filter(Boolean);
  }

  // the overrides box as an ordered list of [name, value]
  function readBox() {
    return splitItems(box.value || "").map(function (item) {
      var at = item.indexOf("=");
      return at < 0 ? [item, null] : [item.slice(0, at).trim(), item.slice(at + 1).trim()];
    });
  }

  function writeBox(name, value, fileValue) {
    var items = readBox().filter(function (p) { return p[0] !== name; });
    if (value.trim() !== "" && value.trim() !== fileValue) items.push([name, value.trim()]);
    box.value = items.map(function (p) { return p[1] == null ? p[0] : p[0] + "=" + p[1]; }).join("\n");
  }

  // the box -> the fields: each field shows what the box sets for its name, else the file's value
  function fillFields() {
    var typed = Object.create(null);
    readBox().forEach(function (p) { if (p[1] != null) typed[p[0]] = p[1]; });
    holder.querySelectorAll("input[data-file-value]").forEach(function (input) {
      var name = input.id.slice("constant-".length);
      var value = typed[name] != null ? typed[name] : input.dataset.fileValue;
      if (input.value !== value && document.activeElement !== input) input.value = value;
    });
  }
  box.addEventListener("input", fillFields);

  function show(constants) {
    while (holder.firstChild) holder.removeChild(holder.firstChild);
    var typed = {};
    readBox().forEach(function (p) { typed[p[0]] = p[1]; });
    constants.forEach(function (c) {
      // the value as an override is typed: the server's text keeps a tuple's parentheses
      var fileValue = c.text != null ? c.text : text(c.value);
      var label = document.createElement("label");
      label.className = "constant";
      label.textContent = c.name + " ";
      var input = document.createElement("input");
      input.type = "text";
      input.name = "constant-" + c.name;
      input.id = "constant-" + c.name;
      input.dataset.fileValue = fileValue;
      input.value = typed[c.name] != null ? typed[c.name] : fileValue;
      input.size = Math.min(Math.max(8, fileValue.length + 2), 40);
      input.addEventListener("input", function () { writeBox(c.name, input.value, fileValue); });
      label.appendChild(input);
      var note = document.createElement("small");
      note.className = "note";
      note.textContent = " file: " + fileValue;
      label.appendChild(note);
      holder.appendChild(label);
    });
    help.textContent = constants.length
      ? "Read from the file, not run. Change a value to override it for this run."
      : "The file sets no module-level number, true/false, list or tuple constant to change.";
    fieldset.hidden = false;
  }

  function readConstants(file) {
    var data = new FormData();
    data.append("upload", file);
    data.append("csrfmiddlewaretoken", form.querySelector("input[name=csrfmiddlewaretoken]").value);
    help.textContent = "Reading the file\u2026";
    fieldset.hidden = false;
    return fetch(form.dataset.constantsUrl, { method: "POST", body: data, credentials: "same-origin" })
      .then(function (r) { return r.json(); })
      .then(function (j) {
        if (j.error) {
          while (holder.firstChild) holder.removeChild(holder.firstChild);
          help.textContent = j.error;
        } else show(j.constants);
      })
      .catch(function () { help.textContent = "Could not read the file's constants."; });
  }

  var maxBytes = parseInt(form.dataset.maxUploadBytes || "0", 10);

  function sizeText(size) {  // as body_limit.size_text writes it
    if (size >= 1000000) return (size / 1000000).toFixed(1) + " MB";
    return size >= 1000 ? Math.floor(size / 1000) + " kB" : size + " bytes";
  }

  // the file chosen when it is over the limit, with the form's message shown; else null (message removed)
  function tooLarge() {
    var old = document.getElementById("upload-too-large");
    if (old) old.parentNode.removeChild(old);
    var file = fileInput.files.length ? fileInput.files[0] : null;
    if (!file || !maxBytes || file.size <= maxBytes) return null;
    var note = document.createElement("div");
    note.className = "errors";
    note.id = "upload-too-large";
    note.setAttribute("role", "alert");
    note.textContent = "The file is larger than " + Math.floor(maxBytes / 1000) + " kB: it is " + sizeText(file.size) +
      " (" + file.size.toLocaleString("en-US") + " bytes). A model file is Python source, usually a few kB; choose the model's .py file.";
    fileInput.parentNode.insertBefore(note, fileInput.nextSibling);
    return file;
  }

  form.addEventListener("submit", function (event) {
    if (tooLarge()) { event.preventDefault(); fileInput.focus(); }  // nothing sent: what was typed stays
  });

  fileInput.addEventListener("change", function () {
    var kept = document.getElementById("kept-upload");
    if (tooLarge()) return;  // said next to the field; its constants are not read
    if (fileInput.files.length) {
      if (kept) kept.parentNode.removeChild(kept); // a new file replaces the kept one
      readConstants(fileInput.files[0]);
    }
  });

  var cpuSize = document.getElementById("example-cpu-size");
  var cpuHint = document.getElementById("example-cpu-hint");
  var cpuSizesTag = document.getElementById("example-cpu-sizes");
  var cpuSizes = cpuSizesTag ? JSON.parse(cpuSizesTag.textContent) : {};
  var device = form.querySelector("select[name=device]");
  var applied = null;  // the CPU sizes last written into the box

  function valueText(v) {
    return Array.isArray(v) ? "[" + v.map(valueText).join(", ") + "]" : text(v);
  }

  // the example's CPU sizes into the box when "CPU size" is ticked, out of it when not; the hint says them
  function applyCpuSize() {
    var sizes = example && Object.prototype.hasOwnProperty.call(cpuSizes, example.value) ? cpuSizes[example.value] : null;
    if (cpuHint) {
      cpuHint.hidden = !sizes;
      cpuHint.textContent = sizes ? "CPU size of " + example.value + ": " +
        Object.keys(sizes).map(function (k) { return k + "=" + valueText(sizes[k]); }).join(", ") +
        (cpuSize && cpuSize.checked ? " (in the overrides box)" : " (tick CPU size to use it)") : "";
    }
    if (!cpuSize || (!sizes && !applied)) return;
    var drop = [sizes, applied];  // this example's sizes, and those written for the example before
    var items = readBox().filter(function (p) {
      return !drop.some(function (d) { return d && Object.prototype.hasOwnProperty.call(d, p[0]); });
    });
    applied = sizes && cpuSize.checked ? sizes : null;
    if (applied) Object.keys(sizes).forEach(function (k) { items.push([k, valueText(sizes[k])]); });
    box.value = items.map(function (p) { return p[1] == null ? p[0] : p[0] + "=" + p[1]; }).join("\n");
    fillFields();
  }

  if (cpuSize) {
    cpuSize.addEventListener("change", applyCpuSize);
    if (device) {
      cpuSize.checked = device.value !== "cuda";
      device.addEventListener("change", function () {  // a GPU run takes the file's sizes, a CPU run the small ones
        cpuSize.checked = device.value !== "cuda";
        applyCpuSize();
      });
    }
  }

  if (example) {
    example.addEventListener("change", function () {
      var name = example.value;
      applyCpuSize();
      if (!name) return;
      fetch(example.dataset.url.replace("NAME", encodeURIComponent(name)), { credentials: "same-origin" })
        .then(function (r) { return r.text(); })
        .then(function (source) {
          var t = new DataTransfer();
          t.items.add(new File([source], name, { type: "text/x-python" }));
          fileInput.files = t.files;
          fileInput.dispatchEvent(new Event("change"));
        });
    });
  }

  var keptConstants = document.getElementById("kept-constants");
  if (keptConstants) show(JSON.parse(keptConstants.textContent));
})();
