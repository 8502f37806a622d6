package gatewaytest

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"testing"
)

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// UseLoginLink opens a one-time login link as a browser would and
// submits the form its page holds. It returns the client, holding the
// session cookie when the login worked, the link page's HTML, and the
// login's HTTP status (303 when it logged in).
func UseLoginLink(t testing.TB, link string) (c *http.Client, page string, status int) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c = &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	m := csrfField.FindStringSubmatch(string(body))
	if m == nil {
		t.Fatalf("no form on the link page (status %d)", res.StatusCode)
	}
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	res, err = c.PostForm(u.Scheme+"://"+u.Host+"/ui/login", url.Values{"csrf": {m[1]}, "link": {u.Query().Get("link")}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return c, string(body), res.StatusCode
}
