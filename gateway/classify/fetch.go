package classify

import "strings"

// curlModel: curl's options that fetch and print, and those that write
// (their value is a file; "-" is standard output), send data or run; an
// option not here is not proved (curl 7.88).
var curlModel = compile(&model{exact: true, names: "curl", short: "sSLfIikv46H:A:X:m:u:x:e:b:c:D:o:Od:F:T:w:K:E:r:C:z:U:GJRNqZ#",
	long: "silent show-error location location-trusted fail fail-with-body head include insecure verbose ipv4 ipv6 " +
		"header= user-agent= request= max-time= user= proxy= referer= cookie= cookie-jar= dump-header= output= " +
		"remote-name remote-name-all remote-header-name data= data-raw= data-binary= data-ascii= data-urlencode= " +
		"json= form= form-string= upload-file= write-out= config= cert= range= continue-at= time-cond= proxy-user= " +
		"get remote-time no-buffer disable parallel progress-bar connect-timeout= retry= retry-delay= retry-max-time= " +
		"retry-all-errors compressed resolve= cacert= capath= noproxy= http1.1 http2 http2-prior-knowledge tlsv1.2 " +
		"tlsv1.3 url= max-redirs= max-filesize= stderr= trace= trace-ascii= libcurl= output-dir= create-dirs " +
		"etag-save= etag-compare= hsts= alt-svc= no-progress-meter keepalive-time= unix-socket= abstract-unix-socket= " +
		"interface= dns-servers= oauth2-bearer= basic digest negotiate ntlm anyauth netrc netrc-optional netrc-file= " +
		"ssl-reqd ssl proto= proto-redir= proto-default= path-as-is globoff styled-output no-styled-output " +
		"post301 post302 post303 quote= request-target= help manual version",
	effects: "o,output,c,cookie-jar,D,dump-header,stderr,trace,trace-ascii,libcurl,etag-save,hsts,alt-svc:write " +
		"output-dir:writedir O,remote-name,remote-name-all,J,remote-header-name,create-dirs,R,remote-time:mutating:curl_saves_a_file_named_by_the_server " +
		"d,data,data-raw,data-binary,data-ascii,data-urlencode,json,F,form,form-string,T,upload-file:mutating:curl_sends_data " +
		"K,config:destructive:curl_reads_options_from_a_file_the_classifier_cannot_read " +
		"quote:destructive:curl_--quote_sends_commands_to_the_server " +
		"netrc-file,cacert,capath,etag-compare:read unix-socket,abstract-unix-socket:mutating:curl_talks_to_a_local_daemon's_socket"})

// curl fetches and prints, unless an option writes a file, sends data,
// or asks with a method other than GET or HEAD.
func (c *classifier) curl(text string, rest []word) {
	opts, ops, ok := c.parse(text, curlModel, rest)
	if !ok {
		return
	}
	for _, u := range ops {
		c.curlURL(text, u)
	}
	for _, p := range opts {
		if p.o.long == "url" && p.val != nil {
			c.curlURL(text, *p.val)
		}
		switch {
		case p.val != nil && p.val.lit && p.val.v == "-" && p.o.value == ValueWritePath:
			// - is standard output.
		case (p.o.short == 'X' || p.o.long == "request") && p.val != nil:
			if !p.val.lit || !strings.EqualFold(p.val.v, "GET") && !strings.EqualFold(p.val.v, "HEAD") {
				c.add(text, Mutating, "curl sends a request that may change something")
			}
		case !c.option(text, curlModel, p.o, p.val):
			return
		}
	}
	c.add(text, ReadOnly, "curl fetches")
}

// curlURL classifies a URL curl is given: http, https and file fetch;
// another scheme (gopher, dict, telnet, ftp, smtp…) can send any bytes
// to any port, or store a file.
func (c *classifier) curlURL(text string, u word) {
	if !u.lit {
		return // a URL from an expansion: its scheme is not known
	}
	scheme, _, found := strings.Cut(u.v, "://")
	if !found {
		return // no scheme: curl guesses http (or from the host's name)
	}
	switch strings.ToLower(scheme) {
	case "http", "https", "file":
	default:
		c.add(text, Mutating, "curl speaks "+scheme+", which can send data to any port or store a file")
	}
}

// wgetModel: wget's options that fetch to standard output and print;
// wget saves what it fetches unless -O - or --spider says otherwise.
var wgetModel = compile(&model{exact: true, names: "wget", short: "qvnSO:T:t:U:c4",
	long: "quiet verbose no-verbose server-response output-document= timeout= tries= user-agent= continue inet4-only " +
		"spider header= no-check-certificate ca-certificate= connect-timeout= read-timeout= max-redirect= " +
		"compression= method= body-data= post-data= post-file= save-headers output-file= append-output= " +
		"directory-prefix= input-file= execute= help version",
	effects: "O,output-document,output-file,append-output:write directory-prefix:writedir input-file,post-file,ca-certificate:read " +
		"execute:destructive:wget_-e_runs_a_wgetrc_command post-data,body-data:mutating:wget_sends_data"})

// wget fetches to standard output (-O -) or checks (--spider) and reads;
// otherwise it saves a file.
func (c *classifier) wget(text string, rest []word) {
	opts, _, ok := c.parse(text, wgetModel, rest)
	if !ok {
		return
	}
	saves := true
	for _, p := range opts {
		switch {
		case (p.o.short == 'O' || p.o.long == "output-document") && p.val != nil && p.val.lit && p.val.v == "-":
			saves = false
		case p.o.long == "spider":
			saves = false
		case p.o.long == "method" && p.val != nil && !(p.val.lit && (strings.EqualFold(p.val.v, "GET") || strings.EqualFold(p.val.v, "HEAD"))):
			c.add(text, Mutating, "wget sends a request that may change something")
		case !c.option(text, wgetModel, p.o, p.val):
			return
		}
	}
	if saves && !anyExact(rest, "-O", "--output-document") && !anyPrefix(rest, "--output-document=", "-O", "-qO", "-nO", "-qnO") {
		c.add(text, Mutating, "wget saves what it fetches")
		return
	}
	c.add(text, ReadOnly, "wget fetches to standard output")
}

// tarList: tar's options when it lists an archive (-t): which archive,
// how to decompress it (by name only: -I and --use-compress-program run
// a program), what to print.
var tarList = compile(&model{exact: true, names: "tar", short: "tvf:zjJaZwOC:", long: "list verbose file= gzip gunzip bzip2 xz lzip lzma lzop " +
	"zstd auto-compress compress uncompress wildcards no-wildcards anchored no-anchored ignore-case no-ignore-case " +
	"numeric-owner full-time utc quoting-style= quote-chars= show-transformed-names occurrence? exclude= " +
	"exclude-from= files-from= null no-null directory= to-stdout blocking-factor= record-size= help version",
	effects: "f,file,exclude-from,files-from:read"})

// tar lists (-t, --list) with the options of tarList and reads; with
// another mode it extracts or writes archives (mutating), --delete
// removes from one.
func (c *classifier) tar(text string, rest []word) {
	args := rest
	if len(args) > 0 && args[0].lit && !strings.HasPrefix(args[0].v, "-") && args[0].v != "" {
		// Old style: the first word is a cluster of letters (tar tvf x).
		args = append([]word{{v: "-" + args[0].v, lit: true, one: true, src: args[0].src}}, args[1:]...)
	}
	if anyArg(args, "--delete") {
		c.add(text, Destructive, "tar deletes from an archive")
		return
	}
	listing := anyArg(args, "--list")
	for _, a := range args {
		if a.lit && strings.HasPrefix(a.v, "-") && !strings.HasPrefix(a.v, "--") && strings.ContainsRune(a.v, 't') {
			listing = true
		}
	}
	if !listing {
		c.add(text, Mutating, "tar extracts or writes an archive")
		if anyArg(args, "--extract", "--get") || len(args) > 0 && args[0].lit && !strings.HasPrefix(args[0].v, "--") && strings.ContainsRune(args[0].v, 'x') {
			c.add(text, Destructive, "tar extracts files named by the archive, anywhere the account can write")
		}
		for _, a := range args {
			if !a.lit || strings.Contains(a.v, "exec") || strings.Contains(a.v, "command") || strings.HasPrefix(a.v, "-I") || strings.Contains(a.v, "script") || strings.Contains(a.v, "rsh") {
				c.add(text, Destructive, "tar with an option that runs a program, or one the classifier cannot read")
				break
			}
		}
		return
	}
	if remoteArchive(args) {
		c.add(text, Destructive, "tar -f HOST:FILE reads the archive through a remote shell")
		return
	}
	c.check(text, tarList, args)
}

// remoteArchive reports whether tar's archive is HOST:FILE (a colon
// before any slash), which tar reaches through a remote shell unless
// --force-local.
func remoteArchive(args []word) bool {
	if anyExact(args, "--force-local") {
		return false
	}
	for i, a := range args {
		f := ""
		switch {
		case !a.lit:
		case a.v == "-f" || a.v == "--file" || strings.HasPrefix(a.v, "-") && !strings.HasPrefix(a.v, "--") && strings.HasSuffix(a.v, "f"):
			if i+1 < len(args) {
				f = args[i+1].v
			}
		case strings.HasPrefix(a.v, "--file="):
			f = strings.TrimPrefix(a.v, "--file=")
		}
		if host, _, ok := strings.Cut(f, ":"); ok && !strings.Contains(host, "/") {
			return true
		}
	}
	return false
}

// openssl prints a version or reads certificates (x509 and s_client
// with the options that print); other commands write keys or files.
func (c *classifier) openssl(text string, rest []word) {
	if len(rest) == 0 || !rest[0].lit {
		c.add(text, Destructive, "openssl with no command the classifier reads")
		return
	}
	allowed := map[string]string{
		"version": "-a -v -b -o -f -p -d -e -c -r",
		"x509": "-in -noout -text -subject -issuer -dates -enddate -startdate -fingerprint -serial -hash -pubkey -modulus " +
			"-purpose -ext -nameopt -inform -sha256 -sha1 -md5 -email -ocsp_uri -checkend -certopt",
		"s_client": "-connect -servername -showcerts -brief -status -CAfile -verify_return_error -alpn -starttls -tls1_2 -tls1_3 -verify",
	}
	withValue := set(`-in -ext -nameopt -inform -checkend -certopt -connect -servername -CAfile -alpn -starttls -verify`)
	opts, ok := allowed[rest[0].v]
	if !ok {
		c.add(text, Mutating, "openssl "+rest[0].v+" may write keys or files")
		return
	}
	for i := 1; i < len(rest); i++ {
		a := rest[i]
		if !a.lit || !strings.Contains(" "+opts+" ", " "+a.v+" ") {
			c.add(text, Destructive, "openssl "+rest[0].v+" "+a.src+" is not an option the classifier knows")
			return
		}
		if withValue[a.v] {
			if i+1 < len(rest) && !rest[i+1].one {
				c.add(text, Destructive, "openssl "+a.v+": "+rest[i+1].src+" may expand to more than one argument")
				return
			}
			i++
		}
	}
	c.add(text, ReadOnly, "openssl "+rest[0].v+" reads")
}
