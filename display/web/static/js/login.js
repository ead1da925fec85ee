// The login page, /login?next=/path: a user logs in (the server's session cookie), then
// goes back to the page that sent here (/reports sends a visitor without a session). A
// user already logged in may continue, or log out (a stickperson refused the reports).

const el = (id) => document.getElementById(id);

// Only a path of this server: never another site ("//host", "/\host", a scheme).
function safeNext(value) {
  if (!value || !value.startsWith("/") || value.startsWith("//") || value.startsWith("/\\")) return "/pit";
  return value;
}

const next = safeNext(new URLSearchParams(location.search).get("next"));
el("for").textContent = `then ${next.split("?")[0]}`;
el("continue").href = next;

async function session() {
  return (await fetch("/api/session", { credentials: "same-origin" })).json();
}

async function show() {
  const info = await session();
  el("login").hidden = Boolean(info.user);
  el("logged-in").hidden = !info.user;
  if (info.user) {
    el("who").textContent = `${info.user} (${(info.roles || []).join(", ")})`;
    el("logout").onclick = async () => {
      await fetch("/api/logout", { method: "POST", credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRF-Token": info.csrf }, body: "{}" });
      el("login-message").textContent = "";
      show();
    };
    return;
  }
  el("login-message").textContent = info.users_configured === false
    ? "No users file is configured on this server: nobody can log in." : "";
  el("login").onsubmit = async (event) => {
    event.preventDefault();
    const response = await fetch("/api/login", {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": info.login_token },
      body: JSON.stringify({ user: el("user").value, password: el("password").value }),
    });
    const data = await response.json().catch(() => ({ error: `HTTP ${response.status}` }));
    if (response.ok) {
      el("password").value = "";
      location.assign(next);
    } else {
      el("login-message").textContent = data.error;
      if (response.status === 403) show(); // the login form expired: a fresh token
    }
  };
}

show();
