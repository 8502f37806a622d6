package classify

// otherModels are the other programs modelled by their option grammar:
// searching, comparing and looking into files.
var otherModels = []model{
	{names: "grep egrep fgrep", short: "EFGPe:f:iwxzsvVm:bnHhoqaId:D:rRLlcTZB:A:C:U", numeric: true, ops: ValueReadPath,
		long:    "extended-regexp fixed-strings basic-regexp perl-regexp regexp= file= ignore-case no-ignore-case word-regexp line-regexp null-data no-messages invert-match version help max-count= byte-offset line-number line-buffered with-filename no-filename label= only-matching quiet silent binary-files= text directories= devices= recursive dereference-recursive include= exclude= exclude-from= exclude-dir= files-without-match files-with-matches count initial-tab null before-context= after-context= context= group-separator= no-group-separator color? colour? binary",
		effects: "f,file,exclude-from:read"},
	// diff -l runs pr, always the same program on diff's own output.
	{names: "diff", short: "qscC:uU:enyW:pF:tTlrNx:X:S:iEZbwBI:aD:dv", ops: ValueReadPath,
		long:    "normal brief report-identical-files context? unified? ed rcs side-by-side width= left-column suppress-common-lines show-c-function show-function-line= label= expand-tabs initial-tab tabsize= suppress-blank-empty paginate recursive no-dereference new-file unidirectional-new-file ignore-file-name-case no-ignore-file-name-case exclude= exclude-from= starting-file= from-file= to-file= ignore-case ignore-tab-expansion ignore-trailing-space ignore-space-change ignore-all-space ignore-blank-lines ignore-matching-lines= text strip-trailing-cr ifdef= old-group-format= new-group-format= unchanged-group-format= changed-group-format= line-format= old-line-format= new-line-format= unchanged-line-format= minimal horizon-lines= speed-large-files color? palette= help version",
		effects: "X,exclude-from,from-file,to-file:read"},
	{names: "diff3", short: "AeE3xXimaTL:v", ops: ValueReadPath,
		long:    "show-all ed show-overlap easy-only overlap-only merge text strip-trailing-cr initial-tab diff-program= label= help version",
		effects: "diff-program:run"},
	// file -C writes NAME.mgc into the working directory for each magic
	// file; -p puts the files' access times back after reading them.
	{names: "file", short: "bcCde:f:F:hikLlm:nNpP:rsSvzZ0", ops: ValueReadPath,
		long:    "help version magic-file= uncompress uncompress-noreport brief checking-printout exclude= exclude-quiet= files-from= separator= mime apple extension mime-type mime-encoding keep-going list dereference no-dereference no-buffer no-pad print0 preserve-date parameter= raw special-files no-sandbox compile debug",
		effects: "C,compile:destructive:file_-C_writes_compiled_magic_files_in_the_working_directory p,preserve-date:mutating:file_-p_sets_the_access_times_of_the_files_it_reads m,magic-file,f,files-from:read"},
	// binutils' strings; -NUM is -n NUM.
	{names: "strings", short: "adfhHn:wot:e:T:s:U:Vv", numeric: true, ops: ValueReadPath,
		long: "all data print-file-name bytes= radix= include-all-whitespace target= encoding= unicode= output-separator= help version"},
	{names: "column", short: "tn:O:N:l:E:deH:R:T:W:LJr:i:p:c:o:s:xhV", ops: ValueReadPath,
		long: "table table-name= table-order= table-columns= table-columns-limit= table-noextreme= table-noheadings table-header-repeat table-hide= table-right= table-truncate= table-wrap= keep-empty-lines json tree= tree-id= tree-parent= output-width= output-separator= separator= fillrows help version"},
	{names: "hexdump", short: "bcCdoxL::e:f:n:s:vhV", ops: ValueReadPath,
		long:    "one-byte-octal one-byte-char canonical two-bytes-decimal two-bytes-octal two-bytes-hex color? format= format-file= length= skip= no-squeezing help version",
		effects: "f,format-file:read"},
	// zcat is gzip -cd, bzcat bzip2 -dc, xzcat xz -dc: nothing undoes
	// their writing to standard output, so -z compresses to it and -k,
	// -f keep nothing.
	{names: "zcat", short: "flqrS:tv", ops: ValueReadPath,
		long: "force list quiet recursive suffix= synchronous test verbose help version"},
	{names: "bzcat", short: "hdzkftcqvLVs123456789", ops: ValueReadPath,
		long: "help decompress compress keep force test stdout quiet verbose license version small fast best"},
	{names: "xzcat", short: "zdtlkfc0123456789eT:qvhHV", ops: ValueReadPath,
		long: "compress decompress test list keep force stdout extreme threads= quiet verbose help long-help version"},
	// jq 1.6: --arg, --argjson, --slurpfile and --rawfile take two
	// values; the table gives them one, so the second is read as an
	// operand (or an option, which is stricter than jq). jq writes no
	// file and runs nothing, whatever its filter.
	{names: "jq", short: "acCeMnrRsSjfL:hV",
		long:    "slurp raw-output join-output ascii-output compact-output color-output monochrome-output sort-keys raw-input null-input from-file exit-status tab indent= unbuffered seq stream arg= argjson= slurpfile= rawfile= argfile= args jsonargs run-tests help version",
		effects: "slurpfile,rawfile,argfile:read"},
}
