package gatewaytest

import "testing"

func TestListeningHTTP(t *testing.T) {
	for _, tc := range []struct{ name, log, want string }{
		{"text", "2026-12-03T10:31:32.000Z [INFO]  airlock: listening: socket=/run/airlock.sock\n" +
			"2026-12-03T10:31:32.001Z [INFO]  airlock: listening: http=127.0.0.1:41234 tls=false\n", "127.0.0.1:41234"},
		{"json", `{"@level":"info","@message":"listening","@module":"airlock","socket":"/run/airlock.sock"}` + "\n" +
			`{"@level":"info","@message":"listening","@module":"airlock","http":"127.0.0.1:41234","tls":false}` + "\n", "127.0.0.1:41234"},
		{"not yet", "2026-12-03T10:31:32.000Z [INFO]  airlock: listening: socket=/run/airlock.sock\n", ""},
		{"another message", `{"@message":"request","http":"127.0.0.1:1"}` + "\n", ""},
	} {
		if got := ListeningHTTP(tc.log); got != tc.want {
			t.Errorf("%s: ListeningHTTP = %q, want %q", tc.name, got, tc.want)
		}
	}
}
