"use strict";
document.querySelectorAll("[data-copy]").forEach(function (el) {
	var button = document.createElement("button");
	button.type = "button";
	button.className = "secondary copy";
	button.textContent = "Copy";
	var status = document.createElement("span");
	status.className = "hint";
	status.setAttribute("role", "status");
	var text = function () {
		return (el.value !== undefined && el.tagName === "INPUT" ? el.value : el.textContent).trim();
	};
	var done = function (ok) {
		status.textContent = ok ? " Copied." : " Select it and copy it by hand.";
	};
	button.addEventListener("click", function () {
		if (navigator.clipboard && window.isSecureContext) {
			navigator.clipboard.writeText(text()).then(function () { done(true); }, function () { done(false); });
			return;
		}
		var range = document.createRange();
		range.selectNodeContents(el);
		var sel = window.getSelection();
		sel.removeAllRanges();
		sel.addRange(range);
		done(false);
	});
	var p = document.createElement("p");
	p.className = "actions";
	p.appendChild(button);
	if (el.hasAttribute("data-download")) {
		var codes = el.querySelectorAll("code");
		var lines = codes.length ? Array.prototype.map.call(codes, function (c) { return c.textContent.trim(); }) : [text()];
		var link = document.createElement("a");
		link.className = "button secondary download";
		link.textContent = "Download";
		link.download = el.getAttribute("data-download");
		link.href = "data:text/plain;charset=utf-8," + encodeURIComponent(lines.join("\n") + "\n");
		p.appendChild(document.createTextNode(" "));
		p.appendChild(link);
		var print = document.createElement("button");
		print.type = "button";
		print.className = "secondary print";
		print.textContent = "Print";
		print.addEventListener("click", function () { window.print(); });
		p.appendChild(document.createTextNode(" "));
		p.appendChild(print);
	}
	p.appendChild(status);
	el.insertAdjacentElement("afterend", p);
});
