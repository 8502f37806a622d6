package web

import (
	"net/http"
	"time"
)

// DeviceInfo is a device login (airlock login --sso) waiting for its
// reviewer, as the gateway's page for it shows it: who began it, where
// and when, for which reviewer, before the reviewer goes on to the
// provider's page.
type DeviceInfo struct {
	// Reviewer is the reviewer the login was begun for: the provider must
	// approve that very reviewer.
	Reviewer string
	// From is the address the login was begun from.
	From             string
	Started, Expires time.Time
	// UserCode is the code to enter at VerificationURI;
	// VerificationURIComplete carries it already ("" when the provider
	// offers none).
	UserCode                                 string
	VerificationURI, VerificationURIComplete string
}

// deviceData is the device page's Data.
type deviceData struct {
	DeviceInfo
	// Continue is where the reviewer goes on to: the provider's page with
	// the code in it, or else the page where the code is entered.
	Continue string
	// CodeInLink says the code is in Continue already.
	CodeInLink bool
}

// devicePage shows a device login before the reviewer approves it at the
// provider: the only place the gateway leads to the provider's page with
// the code in it. It needs no session (the reviewer logs in by this
// login), and knowing the link gives nothing but the facts shown and the
// way to the provider, where only the reviewer named can approve.
func (h *Handler) devicePage(w http.ResponseWriter, r *http.Request) {
	var d DeviceInfo
	ok := false
	if sso := h.sso(); sso != nil {
		d, ok = sso.Device(r.PathValue("page"))
	}
	if !ok {
		h.renderError(w, r, nil, http.StatusNotFound, "No device login waits at this link: it finished, expired, or was never begun. "+
			"Run airlock login --sso --reviewer NAME again if you want to log in.")
		return
	}
	dd := deviceData{DeviceInfo: d, Continue: d.VerificationURIComplete, CodeInLink: d.VerificationURIComplete != ""}
	if !dd.CodeInLink {
		dd.Continue = d.VerificationURI
	}
	h.render(w, r, http.StatusOK, "device", &pageData{Title: "Device login for " + d.Reviewer, Data: dd})
}

// Device is a device login waiting for its reviewer, by its page.
func (e engineSSO) Device(page string) (DeviceInfo, bool) {
	d, ok := e.s.DeviceInfo(page)
	return DeviceInfo(d), ok
}
