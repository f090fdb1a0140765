"use strict";
(function () {
	if (!window.PublicKeyCredential || !navigator.credentials) {
		return;
	}
	var b64 = function (buf) {
		var s = "", bytes = new Uint8Array(buf);
		for (var i = 0; i < bytes.length; i++) {
			s += String.fromCharCode(bytes[i]);
		}
		return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
	};
	var bytes = function (s) {
		var bin = atob(s.replace(/-/g, "+").replace(/_/g, "/"));
		var out = new Uint8Array(bin.length);
		for (var i = 0; i < bin.length; i++) {
			out[i] = bin.charCodeAt(i);
		}
		return out.buffer;
	};
	var ids = function (list) {
		(list || []).forEach(function (c) { c.id = bytes(c.id); });
	};
	var post = function (url, body) {
		return fetch(url, {
			method: "POST", credentials: "same-origin",
			headers: {"Content-Type": "application/json"},
			body: JSON.stringify(body || {})
		}).then(function (r) {
			return r.json().catch(function () { return {}; }).then(function (j) {
				if (!r.ok) {
					throw new Error(j.error || "That did not work. Reload the page and try again.");
				}
				return j;
			});
		});
	};
	var say = function (el, text) {
		var status = document.getElementById(el.getAttribute("data-status"));
		if (status) {
			status.textContent = text;
			status.hidden = !text;
		}
	};
	var asserted = function (c) {
		return {
			id: c.id, rawId: b64(c.rawId), type: c.type,
			response: {
				clientDataJSON: b64(c.response.clientDataJSON),
				authenticatorData: b64(c.response.authenticatorData),
				signature: b64(c.response.signature),
				userHandle: c.response.userHandle ? b64(c.response.userHandle) : null
			}
		};
	};
	var pending = null;
	var getAssertion = function (el, mediation) {
		if (pending) {
			pending.abort();
		}
		var ctl = new AbortController();
		pending = ctl;
		return post(el.getAttribute("data-options")).then(function (o) {
			var pk = o.publicKey;
			pk.challenge = bytes(pk.challenge);
			ids(pk.allowCredentials);
			var req = {publicKey: pk, signal: ctl.signal};
			if (mediation) {
				req.mediation = mediation;
			}
			return navigator.credentials.get(req);
		}).then(function (c) {
			pending = null;
			return post(el.getAttribute("data-finish"), asserted(c)).catch(function (e) {
				e.answered = true;
				throw e;
			});
		}).then(function (j) {
			window.location.assign(j.redirect);
		});
	};
	var failed = function (el) {
		return function (e) {
			if (e && e.name === "AbortError") {
				return;
			}
			say(el, e && e.name === "NotAllowedError" ? "The passkey was not used. Try again, or use another way to sign in." : (e && e.message) || "That did not work.");
		};
	};
	document.querySelectorAll("[data-passkey-get]").forEach(function (el) {
		el.hidden = false;
		el.addEventListener("click", function () {
			say(el, "");
			getAssertion(el).catch(failed(el));
		});
		var input = document.querySelector("input[autocomplete~=webauthn]");
		if (input && el.hasAttribute("data-conditional") && PublicKeyCredential.isConditionalMediationAvailable) {
			PublicKeyCredential.isConditionalMediationAvailable().then(function (ok) {
				if (ok) {
					getAssertion(el, "conditional").catch(function (e) {
						if (e && e.answered) {
							failed(el)(e);
						}
					});
				}
			});
		}
	});
	document.querySelectorAll("form[data-passkey-create]").forEach(function (form) {
		form.hidden = false;
		if (form.parentElement.tagName === "DETAILS") {
			form.parentElement.hidden = false;
		}
		form.addEventListener("submit", function (ev) {
			ev.preventDefault();
			say(form, "");
			var name = form.querySelector("[name=name]").value;
			post(form.getAttribute("data-options")).then(function (o) {
				var pk = o.publicKey;
				pk.challenge = bytes(pk.challenge);
				pk.user.id = bytes(pk.user.id);
				ids(pk.excludeCredentials);
				return navigator.credentials.create({publicKey: pk});
			}).then(function (c) {
				return post(form.getAttribute("action"), {
					name: name,
					credential: {
						id: c.id, rawId: b64(c.rawId), type: c.type,
						response: {
							clientDataJSON: b64(c.response.clientDataJSON),
							attestationObject: b64(c.response.attestationObject),
							transports: c.response.getTransports ? c.response.getTransports() : []
						}
					}
				});
			}).then(function (j) {
				window.location.assign(j.redirect);
			}).catch(function (e) {
				say(form, e && e.name === "NotAllowedError" ? "No passkey was made. Try again." : e && e.name === "InvalidStateError" ? "This authenticator already has a passkey for your account." : (e && e.message) || "That did not work.");
			});
		});
	});
})();
