package classify

// systemModels are the programs of util-linux, procps and their kind that
// read the system's state, with their options as `PROGRAM --help` lists
// them (util-linux 2.38, procps-ng 4.0, systemd 252, iproute2 6.1,
// net-tools 2.10, lsof 4.95, shadow 4.13, sysstat 12.6).
var systemModels = []model{
	// util-linux.
	{names: "lsblk", short: "ADE:I:JMOPST::abde:filmno:prstw:x:yzhV", ops: ValueReadPath,
		long:    "noempty discard dedup= include= json merge output-all pairs scsi tree? all bytes nodeps exclude= fs ascii list perms noheadings output= paths raw inverse topology width= sort= shell zoned sysroot= help version",
		effects: "sysroot:read"},
	{names: "lscpu", short: "abBC::ce::Jp::s:xyhV",
		long:    "all online bytes caches? offline json extended? parse? sysroot= hex physical output-all help version",
		effects: "s,sysroot:read"},
	{names: "findmnt", short: "smkp::w:AabCcDd:eF:fiJlN:nO:o:PRrS:T:M:t:UuvyxhV",
		long:    "fstab mtab kernel poll? timeout= all ascii bytes nocanonicalize canonicalize df direction= evaluate tab-file= first-only invert json list task= noheadings options= output= output-all pairs pseudo shadowed submounts raw real source= target= tree mountpoint= types= uniq notruncate nofsroot shell verify verbose vfs-all help version",
		effects: "F,tab-file:read"},
	{names: "namei", short: "xmolnvhV", ops: ValueReadPath,
		long: "mountpoints modes owners long nosymlinks vertical help version"},
	{names: "lsns", short: "Jlno:p:ruWt:T::hV",
		long: "json list noheadings output= output-all task= raw notruncate nowrap type= tree? help version"},
	{names: "lslocks", short: "bJino:p:ruhV",
		long: "bytes json noinaccessible noheadings output= output-all pid= raw notruncate help version"},
	{names: "whereis", short: "bB:mM:sS:fulhV", long: "help version"},
	// last and lastb read wtmp and btmp, or the file -f names.
	{names: "last lastb", short: "adf:Fin:Rs:t:p:wxhV", numeric: true,
		long:    "hostlast dns file= fulltimes ip limit= nohostname since= until= present= fullnames system time-format= help version",
		effects: "f,file:read"},
	// dmesg -C, -c clear the kernel's ring buffer; -D, -E, -n set what
	// reaches the console.
	{names: "dmesg", short: "CcDEF:f:HJkL::l:n:PprSs:uwWxdeTthV",
		long:    "clear read-clear console-off console-on file= facility= human json kernel color? level= console-level= nopager force-prefix raw noescape syslog buffer-size= userspace follow follow-new decode show-delta reltime ctime notime time-format= since= until= help version",
		effects: "C,clear,c,read-clear:privileged:dmesg_-C_clears_the_kernel_log D,console-off,E,console-on,n,console-level:privileged:dmesg_sets_what_the_console_prints F,file:read"},

	// systemd's journalctl: the --vacuum-* options delete journal files;
	// --rotate, --flush, --sync, the --relinquish-var ones,
	// --update-catalog and --setup-keys change journald's files or
	// state; --cursor-file reads FILE and writes the last cursor to it;
	// --image attaches a disk image.
	{names: "journalctl", numeric: true, short: "M:mD:S:U:c:b::u:t:p:g:ko:n::rxafqehNF:",
		long:    "system user machine= merge directory= file= root= image= namespace= since= until= cursor= after-cursor= cursor-file= boot? unit= user-unit= identifier= priority= facility= grep= case-sensitive? dmesg output= output-fields= lines? reverse show-cursor utc catalog no-hostname no-full all follow no-tail quiet no-pager pager-end interval= verify-key= force help version fields field= list-boots disk-usage vacuum-size= vacuum-files= vacuum-time= verify sync relinquish-var smart-relinquish-var flush rotate header list-catalog dump-catalog update-catalog setup-keys",
		effects: "vacuum-size,vacuum-files,vacuum-time:destructive:journalctl_--vacuum_deletes_journal_files rotate,flush,sync,relinquish-var,smart-relinquish-var,update-catalog,setup-keys:privileged:journalctl_changes_the_journal's_files_or_state cursor-file:write image:destructive:journalctl_--image_attaches_a_disk_image D,directory,file,root:read"},

	// procps.
	{names: "free", short: "bkmghltvs:c:wV",
		long: "bytes kilo mega giga tera peta kibi mebi gibi tebi pebi human si lohi total committed seconds= count= wide help version"},
	{names: "pgrep", short: "d:lavwcfg:G:inoO:P:s:t:u:U:xF:Lr:AhV",
		long:    "delimiter= list-name list-full inverse lightweight count full pgroup= group= ignore-case newest oldest older= parent= session= terminal= euid= uid= exact pidfile= logpidfile runstates= ignore-ancestors cgroup= ns= nslist= help version",
		effects: "F,pidfile:read"},
	{names: "vmstat", short: "afmnsdDp:S:wtyhV",
		long: "active forks slabs one-header stats disk disk-sum partition= unit= wide timestamp no-first help version"},
	{names: "w", short: "husfoiV",
		long: "no-header no-current short from old-style ip-addr help version"},
	// ps takes UNIX options (-o), GNU long ones (--pid) and BSD ones,
	// words without a dash (aux): those are operands here. No option of
	// any kind writes a file or runs a program, so a BSD word is text.
	{names: "ps", short: "AaC:cdeFfG:g:HjLlMmNO:o:Pp:q:s:Tt:U:u:Vwy",
		long: "Group= User= context cols= columns= cumulative deselect forest format= group= headers help? lines= no-headers pid= ppid= quick-pid= rows= sid= sort= tty= user= version width="},
	// sysvinit-utils' pidof (getopt "qhco:d:sxzn", no long options).
	{names: "pidof", short: "qhco:d:sxzn"},

	// sysstat reads its options itself: a value is always the next word
	// (-C bash, never -Cbash; the table's attached form only fails
	// there). iostat -p and pidstat -U take a value only when one
	// follows, so it is an operand here, where operands are text.
	// pidstat -e PROGRAM ARGS... runs the program.
	{names: "iostat", short: "cdhkmNstVxyzf:j:Hg:po:", long: "compact dec= human pretty",
		effects: "f:read"},
	{names: "mpstat", short: "AnTuVI:N:o:P:", long: "dec="},
	{names: "pidstat", short: "dHhIlRrstuVvwUC:G:p:T:e:", long: "dec= human",
		effects: "e:run"},

	// Users, names and the network.
	// shadow's lastlog: -C, -S change the records.
	{names: "lastlog", short: "b:ChR:St:u:",
		long:    "before= clear help root= set time= user=",
		effects: "C,clear,S,set:privileged:lastlog_-C,_-S_change_the_login_records R,root:read"},
	{names: "getent", short: "Ais:?V",
		long: "no-addrconfig no-idn service= help usage version"},
	{names: "locale", short: "amckv?V",
		long: "all-locales charmaps category-name keyword-name verbose help usage version"},
	// debianutils' which: getopts "a".
	{names: "which", short: "a"},
	// hostname NAME, -F FILE and -b set the host name.
	{names: "hostname", short: "aAdfbF:h?iIsVy", ops: ValueCustom, opsFn: opsHostname,
		long:    "domain boot file= fqdn all-fqdns help long short version alias ip-address all-ip-addresses nis yp",
		effects: "F,file:read F,file,b,boot:privileged:hostname_-F,_-b_set_the_host_name"},
	// ss -K closes sockets; -D writes what it reads to a file.
	{names: "ss", short: "hVnraloempTisbEZzN:460tMSudwxf:KHOA:D:F:",
		long:    "help version numeric resolve all listening options extended memory processes threads info tipcinfo summary tos cgroup bpf events context contexts net= ipv4 ipv6 packet tcp mptcp sctp udp dccp raw unix tipc vsock xdp family= kill no-header oneline inet-sockopt query= socket= diag= filter=",
		effects: "K,kill:destructive:ss_-K_closes_sockets D,diag:write F,filter:read"},
	// net-tools' netstat.
	{names: "netstat", short: "A:CFMacdeghilnNoprsStuUvVWw2fx64Z",
		long: "version interfaces help route masquerade protocol= tcp sctp udp udplite raw unix l2cap rfcomm listening all timers continuous extend programs verbose statistics wide numeric numeric-hosts numeric-ports numeric-users symbolic cache fib groups context inet inet6 ax25 ipx netrom rose ddp x25 ip"},
	// lsof's own option reader: an optional value is attached or the
	// next word when that has no "-" or "+" (then an operand here: lsof
	// writes no file whatever its words say); "+d DIR" and the other
	// "+" forms are operands here for the same reason.
	{names: "lsof", short: "?abhlnNOPQRtUvVXEMwc:d:e:p:u:s::o::K::L::r::S::T::x::Z::F::g::i::f::"},
}
