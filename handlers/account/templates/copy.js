// Copy buttons for one-time secrets. Every element with
// a data-copy attribute gets a Copy button after it; without JavaScript the
// secret stays on the page to select by hand. Served from /auth/copy.js and
// allowed by the pages' Content-Security-Policy through its hash (the
// script tag carries the same hash as its integrity).
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
	p.appendChild(status);
	el.insertAdjacentElement("afterend", p);
});
