package classify

// netModels are programs that ask the network and print, and tree, which
// are not on every machine: their tables come from their manuals
// (iputils ping 20221126, BIND 9.18 dig and nslookup, tree 2.1). None
// of ping's, dig's or nslookup's options writes a file or runs a
// program, so a wrong value count could only misplace an operand.
var netModels = []model{
	{exact: true, names: "ping ping6", short: "aAbBc:dDfhI:i:l:LM:m:nOp:qQ:rRs:S:t:T:UvVw:W:46e:C",
		long: "help version"},
	// dig's +options and @server are operands (they do not start with -).
	{exact: true, names: "dig", short: "b:c:f:k:m:p:q:t:x:y:46hruv",
		effects: "f,k:read"},
	{exact: true, names: "nslookup", long: "help version"},
	// tree -o writes its listing to a file; -R writes 00Tree.html in
	// every directory.
	{exact: true, names: "tree", short: "adlfxL:RP:I:ugshDFqNQpio:nCAS", numeric: false,
		long:    "help version noreport charset= filelimit= timefmt= inodes device dirsfirst filesfirst gitignore gitfile= matchdirs metafirst prune sort= fromfile du si info infofile= ignore-case nolinks hintro= houtro= fflinks",
		effects: "o:write R:mutating:tree_-R_writes_a_listing_into_every_directory gitfile,infofile:read"},
}
