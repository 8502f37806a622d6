package engine

import "testing"

func TestBucket(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:5000":            "loopback",
		"127.45.3.9:1":              "loopback",
		"[::1]:80":                  "loopback",
		"[::ffff:127.0.0.2]:80":     "loopback",
		"192.0.2.7:443":             "192.0.2.7",
		"[::ffff:192.0.2.7]:443":    "192.0.2.7",
		"192.0.2.8":                 "192.0.2.8",
		"[2001:db8:1:2::5]:22":      "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:22": "2001:db8:1:2::/64",
		"[2001:db8:1:3::5]:22":      "2001:db8:1:3::/64",
		"[fe80::1%eth0]:22":         "fe80::/64",
		"@":                         "@",
		"":                          "",
	} {
		if got := Bucket(addr); got != want {
			t.Errorf("Bucket(%q) = %q, want %q", addr, got, want)
		}
	}
}
