"""The check every visitor passes before any page renders: an access token, Streamlit's OIDC login, or
nothing for a dashboard only this machine can reach.

``granted`` decides without drawing anything; ``render`` is the one page a visitor who has not passed
sees (the sign-in form, or why the dashboard shows nothing). A token is compared with
``hmac.compare_digest`` and only a digest of it is kept in the visitor's session state; a bound
address that is not loopback with no access control set fails closed.
"""

from __future__ import annotations

import hashlib
import hmac

import streamlit as st

from workbench.dashboard.access import AUTH_ENV, TOKEN_ENV, TOKEN_FILE_ENV, Settings, is_loopback

SESSION_KEY = "_workbench_access"
DOCS = 'docs/dashboard.md ("Opening it to a team safely")'


def bound_address() -> str | None:
    """The address this Streamlit server listens on (None or "": every interface)."""
    return st.get_option("server.address")


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def granted(settings: Settings | None) -> bool:
    """Whether this session may see the pages (None: the settings could not be read, so nobody may)."""
    if settings is None:
        return False
    if settings.oidc:
        return (
            _oidc_configured()
            and bool(st.user.get("is_logged_in", False))
            and st.user.get("email_verified") is not False
            and settings.allows(str(st.user.get("email") or ""))
        )
    if settings.token is not None:
        return hmac.compare_digest(str(st.session_state.get(SESSION_KEY, "")), _digest(settings.token))
    return is_loopback(bound_address())


def _oidc_configured() -> bool:
    try:
        return st.secrets.load_if_toml_exists() and "auth" in st.secrets
    except Exception:
        return False


def render(settings: Settings | None, problem: str | None = None) -> None:
    """What a visitor who has not passed ``granted`` sees: the sign-in, or why nothing is shown."""
    st.title("Speech precision workbench")
    if settings is None:
        st.error(f"The dashboard's access settings are invalid, so it shows nothing: {problem}")
    elif settings.oidc:
        _oidc_login(settings)
    elif settings.token is not None:
        _token_form(settings.token)
    else:
        st.error(
            f"This dashboard listens on `{bound_address() or 'every interface'}`, which other machines can "
            f"reach, and no access control is set, so it shows nothing. Serve it with "
            f"`python -m workbench dashboard --address ... --token-file FILE` (or set {TOKEN_ENV} / "
            f"{TOKEN_FILE_ENV}, or {AUTH_ENV}=oidc), or bind it to 127.0.0.1. See {DOCS}."
        )


def _token_form(token: str) -> None:
    st.caption("This dashboard is shared. Enter the access token you were given.")
    with st.form("access", clear_on_submit=True):
        entered = st.text_input("Access token", type="password")
        submitted = st.form_submit_button("Open the dashboard", type="primary")
    if not submitted:
        return
    if entered and hmac.compare_digest(entered.strip().encode(), token.encode()):
        st.session_state[SESSION_KEY] = _digest(token)
        st.rerun()
    st.error("That access token is not right." if entered else "Enter the access token.")


def _oidc_login(settings: Settings) -> None:
    if not _oidc_configured():
        st.error(
            f"{AUTH_ENV}=oidc, but no `[auth]` section was found in `.streamlit/secrets.toml`, so the "
            f"dashboard shows nothing. Configure your identity provider there (see {DOCS})."
        )
        return
    if st.user.get("is_logged_in", False):  # logged in, but not on the allow-list
        st.error(f"The account {st.user.get('email') or '(no e-mail)'} may not open this dashboard.")
        st.button("Log out", on_click=st.logout)
        return
    st.caption("This dashboard is shared. Log in with your organisation's account.")
    st.button("Log in", on_click=st.login, type="primary")
