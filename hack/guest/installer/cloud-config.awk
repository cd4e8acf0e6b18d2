# The installer's cloud-config reader (busybox awk), run on the NoCloud
# seed's user-data:  awk -v out=DIR -f cloud-config.awk user-data
# It honours this subset of cloud-config, and nothing else:
#
#   The user data is one "#cloud-config" document, or a MIME multipart
#   message (as banlieue joins several) whose text/cloud-config parts (or
#   undeclared parts starting "#cloud-config") are read in order. Other
#   parts are ignored (a WARN line names them).
#
#   write_files: a block list (items at any indentation, "- " first), each
#     item's keys in any order:
#       path:        absolute path in the installed system (required)
#       content:     a plain, 'single' or "double" quoted scalar (\n \t \"
#                    \\ escapes; continuation lines are folded with a space)
#                    or a literal block "|", "|-" or "|+"
#       permissions: octal mode, e.g. '0644' (default 0644)
#       encoding:    text/plain (default), b64 or base64
#     Any other key of an item (owner, append, defer...) is ignored, with a
#     WARN line.
#   runcmd: a block list; each item is a shell command: a scalar as above
#     (a literal block is a multi-line script), or a flow list [a, b, c]
#     joined by spaces (no shell quoting is added).
#   Every other top-level key is ignored, with a WARN line. Flow-style
#   write_files or runcmd ("write_files: [...]") is refused (WARN, ignored).
#
# Output in DIR: wf.N.path, wf.N.content, wf.N.perm, wf.N.enc for each
# write_files entry N (1, 2...), and runcmd (one command a line), appended
# across documents. WARN lines go to stdout.

function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }
function indent(s) { match(s, /^ */); return RLENGTH }
function dq(v,   o, i, c) {
    o = ""
    for (i = 1; i <= length(v); i++) {
        c = substr(v, i, 1)
        if (c == "\\" && i < length(v)) {
            i++; c = substr(v, i, 1)
            if (c == "n") c = "\n"; else if (c == "t") c = "\t"; else if (c == "r") c = "\r"
        }
        o = o c
    }
    return o
}
# A scalar's value: quotes removed (and escapes applied), or a plain
# scalar's trailing comment.
function scalar(v) {
    v = trim(v)
    if (v ~ /^'.*'$/) { v = substr(v, 2, length(v) - 2); gsub(/''/, "'", v); return v }
    if (v ~ /^".*"$/) return dq(substr(v, 2, length(v) - 2))
    sub(/[ \t]+#.*$/, "", v)
    return v
}
function warn(m) { print "WARN " m }
function put(f, s) { printf "%s", s > (out "/" f); close(out "/" f) }
# Ends the scalar value being gathered (a block or a folded one).
function endvalue(   v) {
    if (blk) {
        v = buf
        if (chomp == "-") sub(/\n+$/, "", v)
        else if (chomp != "+") { sub(/\n+$/, "", v); if (v != "") v = v "\n" }
        blk = 0; buf = ""
        store(v)
    } else if (fold) {
        fold = 0; store(scalar(buf)); buf = ""
    }
}
function store(v) {
    if (target == "content") put("wf." n ".content", v)
    else if (target == "runcmd") { printf "%s\n", v >> (out "/runcmd"); close(out "/runcmd") }
    target = ""
}
# Starts a value: a block, a quoted scalar not closed on this line, a
# plain one (possibly folded onto the next lines), or a flow list.
function value(v, ind) {
    v = trim(v)
    if (v ~ /^[|>]/) {
        if (v ~ /^>/) warn("folded scalar (>) read as a literal one (|)")
        chomp = substr(v, 2, 1); blk = 1; blkind = -1; minind = ind + 1; buf = ""
        return
    }
    if (target == "runcmd" && v ~ /^\[/) {
        sub(/^\[/, "", v); sub(/\][ \t]*$/, "", v)
        k = split(v, a, ","); v = ""
        for (j = 1; j <= k; j++) v = v (j > 1 ? " " : "") scalar(a[j])
        store(v); return
    }
    if (v ~ /^"/ && (v == "\"" || v !~ /[^\\]"$/)) { fold = 1; quoted = 1; buf = v; minind = ind + 1; return }
    fold = 1; quoted = 0; buf = v; minind = ind + 1
}
function prop(kv, ind,   k, v) {
    k = kv; sub(/:.*/, "", k); k = trim(k)
    v = kv; if (!sub(/^[^:]*:/, "", v)) v = ""
    if (k == "path") put("wf." n ".path", scalar(v))
    else if (k == "permissions") put("wf." n ".perm", scalar(v))
    else if (k == "encoding") put("wf." n ".enc", scalar(v))
    else if (k == "content") { target = "content"; value(v, ind) }
    else warn("write_files: key " k " ignored")
}
function reset() { section = ""; blk = 0; fold = 0; target = ""; buf = "" }

BEGIN { n = 0; mime = 0; incc = 0; reset() }
{ sub(/\r$/, "") }
# MIME multipart: the boundary from the first header, parts after it.
NR == 1 && /^[Cc]ontent-[Tt]ype: *multipart\// {
    mime = 1; boundary = $0; sub(/.*boundary=/, "", boundary); gsub(/["; ]/, "", boundary)
    next
}
NR == 1 && !mime { incc = ($0 ~ /^#cloud-config/); if (!incc) warn("user-data is not #cloud-config: ignored"); next }
mime && ($0 == "--" boundary || $0 == "--" boundary "--") {
    if (incc) endvalue()
    reset(); incc = 0; headers = ($0 == "--" boundary); ctype = ""; first = 0
    next
}
mime && headers {
    if ($0 == "") { headers = 0; first = 1; next }
    if (tolower($0) ~ /^content-type:/) { ctype = tolower($0); sub(/^content-type: */, "", ctype); sub(/;.*/, "", ctype) }
    next
}
mime && first {
    first = 0
    incc = (ctype == "text/cloud-config" || ((ctype == "" || ctype == "text/plain") && $0 ~ /^#cloud-config/))
    if (!incc) warn("MIME part " (ctype == "" ? "text/plain" : ctype) " ignored")
    next
}
!incc { next }
# Inside a literal block: its lines, until one less indented.
blk {
    if ($0 ~ /^[ \t]*$/) { if (blkind >= 0) buf = buf substr($0, blkind + 1) "\n"; else pendnl = pendnl "\n"; next }
    if (blkind < 0 && indent($0) >= minind) { blkind = indent($0); buf = pendnl; pendnl = "" }
    if (blkind >= 0 && indent($0) >= blkind) { buf = buf substr($0, blkind + 1) "\n"; next }
    pendnl = ""; endvalue()
}
# A folded plain or quoted scalar's continuation lines.
fold {
    if ($0 !~ /^[ \t]*$/ && indent($0) >= minind && (quoted || $0 !~ /^ *- /)) {
        buf = buf " " trim($0)
        if (quoted && buf ~ /[^\\]"$/) endvalue()
        next
    }
    endvalue()
}
/^[ \t]*#/ || /^[ \t]*$/ || /^---/ { next }
# A top-level key.
/^[A-Za-z_][A-Za-z0-9_-]*:/ {
    section = $0; sub(/:.*/, "", section)
    v = $0; sub(/^[^:]*:/, "", v); v = trim(v)
    if (section == "write_files" || section == "runcmd") {
        if (v != "") { warn(section ": only block lists are read, not \"" v "\": ignored"); section = "" }
    } else {
        warn("key " section " ignored"); section = ""
    }
    next
}
section == "write_files" && /^ *- / {
    n++; put("wf." n ".perm", "0644")
    rest = $0; sub(/^ *- */, "", rest)
    propind = length($0) - length(rest)
    if (rest != "") prop(rest, propind)
    next
}
section == "write_files" && n > 0 && indent($0) == propind && /^ *[A-Za-z_]+:/ { prop($0, propind); next }
section == "runcmd" && /^ *- / {
    rest = $0; sub(/^ *- */, "", rest)
    target = "runcmd"; value(rest, indent($0))
    next
}
section != "" { warn(section ": line not understood: " $0) }
END { if (incc) endvalue() }
