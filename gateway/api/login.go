package api

import "time"

// The bodies of reviewer logins: password, and the device grant.

// LoginRequest is the body of POST /v1/login.
type LoginRequest struct {
	Reviewer string `json:"reviewer"`
	Password string `json:"password"`
	// Device is the proof an earlier password login of this reviewer
	// gave this client (LoginResponse.Device), if it kept one. It is no
	// credential: it only charges a wrong password to this client's own
	// budget, so guesses from elsewhere never slow this client down.
	Device string `json:"device,omitempty"`
}

// LoginResponse carries a reviewer session token for the Authorization
// header.
type LoginResponse struct {
	Token     string    `json:"token,omitempty"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// Reviewer is who logged in (set by single sign-on).
	Reviewer string `json:"reviewer,omitempty"`
	// Device is a remembered login device proof for this reviewer (after
	// a password login), to send as LoginRequest.Device with later
	// password logins until DeviceExpiresAt. Keep it with the client's
	// private files; a new password or a disable ends it.
	Device          string    `json:"device,omitempty"`
	DeviceExpiresAt time.Time `json:"device_expires_at,omitzero"`
}

// DeviceLoginRequest is the body of POST /v1/login/device: the reviewer
// the login is for. The provider must approve that very reviewer, or no
// token is handed out.
type DeviceLoginRequest struct {
	Reviewer string `json:"reviewer"`
}

// DeviceLogin is the answer to POST /v1/login/device: a reviewer CLI's
// single sign-on. The reviewer opens PageURL, the gateway's own page,
// which shows where and when the login was begun and for whom before it
// leads on to the provider's VerificationURI with UserCode; the CLI
// polls POST /v1/login/device/token with DeviceID every IntervalS
// seconds.
type DeviceLogin struct {
	DeviceID string `json:"device_id"`
	// Page is the id of the login's page, PageURL the page:
	// /ui/device/PAGE on the gateway.
	Page    string `json:"page"`
	PageURL string `json:"page_url,omitempty"`
	// Reviewer is the reviewer the login is for; From the address it was
	// begun from, at StartedAt.
	Reviewer        string    `json:"reviewer"`
	From            string    `json:"from"`
	StartedAt       time.Time `json:"started_at"`
	UserCode        string    `json:"user_code"`
	VerificationURI string    `json:"verification_uri"`
	ExpiresAt       time.Time `json:"expires_at"`
	IntervalS       int       `json:"interval_s"`
}

// DeviceTokenRequest is the body of POST /v1/login/device/token.
type DeviceTokenRequest struct {
	DeviceID string `json:"device_id"`
}

// DeviceTokenResponse is its answer: Status "pending" until the reviewer
// has approved, then "ok" with the reviewer token (once).
type DeviceTokenResponse struct {
	Status string `json:"status"`
	LoginResponse
}
