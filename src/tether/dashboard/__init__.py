"""The web dashboard (extra ``tether[dashboard]``): server-rendered pages over the store
contract, so it works on every store; see docs/dashboard.md."""
