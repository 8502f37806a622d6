package classify

// writerModels are programs that write the files their arguments name:
// their grammar says which arguments those are, so the write is
// classified by its path (coreutils 9.1).
var writerModels = []model{
	{names: "tee", short: "aip", ops: ValueCustom, opsFn: opsEachOpened,
		long: "append ignore-interrupts output-error? help version"},
	{names: "touch", short: "acd:fhmr:t:", ops: ValueCustom, opsFn: opsEachChanged,
		long:    "no-create date= no-dereference reference= time= help version",
		effects: "r,reference:read"},
	{names: "mv", short: "bfinS:t:TuvZ", ops: ValueCustom, opsFn: opsMove,
		long:    "backup? force interactive no-clobber strip-trailing-slashes suffix= target-directory= no-target-directory update verbose context help version",
		effects: "t,target-directory:writedir S,suffix:destructive:a_backup_suffix_builds_file_names_the_classifier_does_not_place"},
	// cp --parents writes DEST/SOURCE, the source's whole path below the
	// destination, which the operands' rule does not follow.
	{names: "cp", short: "abdfiHlLnPpRrsS:t:TuvxZ", ops: ValueCustom, opsFn: opsCopy,
		long:    "archive attributes-only backup? copy-contents force interactive link dereference no-clobber no-dereference preserve? no-preserve= parents recursive reflink? remove-destination sparse= strip-trailing-slashes symbolic-link suffix= target-directory= no-target-directory update verbose one-file-system context? help version",
		effects: "t,target-directory:writedir parents:destructive:cp_--parents_writes_below_the_destination_by_the_sources'_paths S,suffix:destructive:a_backup_suffix_builds_file_names_the_classifier_does_not_place"},
	{names: "ln", short: "bdFfiLnPrsS:t:Tv", ops: ValueCustom, opsFn: opsLink,
		long:    "backup? directory force interactive logical no-dereference physical relative symbolic suffix= target-directory= no-target-directory verbose help version",
		effects: "t,target-directory:writedir S,suffix:destructive:a_backup_suffix_builds_file_names_the_classifier_does_not_place"},
	{names: "install", short: "bcCdDg:m:o:psS:t:TvZ", ops: ValueCustom, opsFn: opsInstall,
		long:    "backup? compare directory group= mode= owner= preserve-timestamps strip strip-program= suffix= target-directory= no-target-directory verbose preserve-context context? help version",
		effects: "t,target-directory:writedir strip-program:run S,suffix:destructive:a_backup_suffix_builds_file_names_the_classifier_does_not_place"},
	{names: "mkdir", short: "m:pvZ", ops: ValueCustom, opsFn: opsEachChanged,
		long: "mode= parents verbose context? help version"},
	// chmod's MODE, chown's and chgrp's OWNER and GROUP are operands
	// too: with --reference there are none.
	{names: "chmod", short: "cfvR", ops: ValueCustom, opsFn: opsEachTree,
		long:    "changes silent quiet verbose no-preserve-root preserve-root reference= recursive help version",
		effects: "reference:read"},
	{names: "chown", short: "cfvhRHLP", ops: ValueCustom, opsFn: opsEachTree,
		long:    "changes silent quiet verbose dereference no-dereference from= no-preserve-root preserve-root reference= recursive help version",
		effects: "reference:read"},
	{names: "chgrp", short: "cfvhRHLP", ops: ValueCustom, opsFn: opsEachTree,
		long:    "changes silent quiet verbose dereference no-dereference no-preserve-root preserve-root reference= recursive help version",
		effects: "reference:read"},
	{names: "split", short: "a:b:C:dxel:n:t:u", numeric: true, ops: ValueCustom, opsFn: opsSplit,
		long:    "suffix-length= additional-suffix= bytes= line-bytes= numeric-suffixes? hex-suffixes? elide-empty-files filter= lines= number= separator= unbuffered verbose help version",
		effects: "filter:run"},
	// csplit -f PREFIX writes PREFIX00, PREFIX01, …: any name that starts
	// with PREFIX may be one of them.
	{names: "csplit", short: "b:f:kn:sz", ops: ValueCustom, opsFn: opsCsplit,
		long:    "suffix-format= prefix= keep-files suppress-matched digits= quiet silent elide-empty-files help version",
		effects: "f,prefix:write f,prefix:destructive:csplit_-f_writes_files_whose_names_start_with_the_prefix"},
	// truncate cannot run without -s or -r: either makes it destructive.
	{names: "truncate", short: "cor:s:", ops: ValueCustom, opsFn: opsEachChanged,
		long:    "no-create io-blocks reference= size= help version",
		effects: "r,reference:read r,reference,s,size:destructive:truncate_cuts_or_extends_files"},
	// rsync (3.x) SRC... DEST: the destination is written as cp's is, and
	// a remote operand (HOST:PATH, HOST::MODULE, rsync://) makes it reach
	// another host (opsRsync). --delete* and --remove-source-files remove
	// files; -e, --rsync-path run programs; -M passes any option to the
	// other side; --trust-sender, --insecure-links drop rsync's own
	// checks; --copy-as switches user; --write-devices writes devices.
	// A --no-OPTION not listed here is unknown, so destructive.
	{names: "rsync", short: "vqcarRbudlLkKHpEAXogDtUNOJSnWxB:e:mIT:yzCf:F0s8hPiM:46V", ops: ValueCustom, opsFn: opsRsync,
		long: "verbose info= debug= stderr= quiet no-motd checksum archive recursive inc-recursive i-r no-inc-recursive no-i-r relative no-implied-dirs backup backup-dir= suffix= update inplace append append-verify dirs old-dirs old-d mkpath links copy-links copy-unsafe-links safe-links insecure-links confine-root= munge-links copy-dirlinks keep-dirlinks hard-links perms executability chmod= acls xattrs owner group devices copy-devices write-devices specials drop-D times atimes open-noatime crtimes omit-dir-times omit-link-times super fake-super sparse preallocate dry-run whole-file no-whole-file no-W checksum-choice= one-file-system block-size= rsh= rsync-path= existing ignore-non-existing ignore-existing remove-source-files del delete delete-before delete-during delete-delay delete-after delete-excluded ignore-missing-args delete-missing-args ignore-errors force max-delete= max-size= min-size= max-alloc= partial partial-dir= delay-updates prune-empty-dirs numeric-ids usermap= groupmap= chown= timeout= contimeout= ignore-times size-only modify-window= temp-dir= fuzzy compare-dest= copy-dest= link-dest= compress compress-choice= compress-level= compress-threads= skip-compress= cvs-exclude filter= exclude= exclude-from= include= include-from= files-from= from0 old-args secluded-args trust-sender copy-as= address= port= sockopts= blocking-io outbuf= stats 8-bit-output human-readable progress itemize-changes remote-option= out-format= log-file= log-file-format= password-file= early-input= list-only bwlimit= stop-after= stop-at= fsync write-batch= only-write-batch= read-batch= protocol= iconv= checksum-seed= ipv4 ipv6 version help",
		effects: "e,rsh,rsync-path:run suffix:destructive:a_backup_suffix_builds_file_names_the_classifier_does_not_place " +
			"del,delete,delete-before,delete-during,delete-delay,delete-after,delete-excluded,delete-missing-args,remove-source-files,force:destructive:rsync_removes_files " +
			"M,remote-option:destructive:rsync_-M_passes_an_option_to_the_other_side " +
			"trust-sender,insecure-links:destructive:rsync_drops_its_checks_of_what_the_other_side_sends " +
			"copy-as:destructive:rsync_--copy-as_switches_user write-devices:destructive:rsync_--write-devices_writes_devices " +
			"log-file,write-batch,only-write-batch:write backup-dir,partial-dir,T,temp-dir:writedir " +
			"files-from,exclude-from,include-from,password-file,early-input,read-batch,compare-dest,copy-dest,link-dest:read"},
}
