#!/usr/bin/env bash
# man.sh — the man pages vault(1), vproxy(1), vrun(1) and vrun-profile(5):
# each renders with groff without a single warning (-ww, warnings are
# errors) and through man(1) where it is installed; each names its program and the other pages;
# and every option a program's --help shows (of every subcommand) is
# documented in its page, so help and manual speak one vocabulary.
. "$(dirname "$0")/lib.sh" "$@"
. "$(dirname "$0")/progs.sh"
need groff

MAN="$SRC/man"
for page in vault.1 vproxy.1 vrun.1 vrun-profile.5; do
	f="$MAN/$page"
	check "$page exists" test -f "$f"
	groff -man -Tutf8 -ww -z "$f" >"$T/out" 2>"$T/err"
	RC=$?
	LAST_CMD="groff -man -Tutf8 -ww -z $page"
	expect_rc 0 "$page renders with groff"
	expect_no_err "$page renders without groff warnings"
	if command -v man >/dev/null 2>&1; then
		MANWIDTH=80 man --warnings -l "$f" >"$T/out" 2>"$T/err"
		LAST_CMD="man --warnings -l $page"
	else
		groff -man -Tutf8 -rLL=80n "$f" >"$T/out" 2>"$T/err"
		LAST_CMD="groff -man -Tutf8 $page (man is not installed)"
	fi
	RC=$?
	expect_rc 0 "$page renders"
	expect_no_err "$page renders without warnings"
	name=${page%.*}
	check "$page: NAME section names $name" grep -qE "^ +${name}( |$)" "$T/out"
	expect_out "SEE ALSO" "$page"
done

# Options of --help in the page (roff writes '-' as '\-').
for prog in vault vproxy vrun; do
	case $prog in
	vault) bin=$VAULT subs="init add list show rm passwd audit doctor" ;;
	vproxy) bin=$VPROXY subs="start stop status" ;;
	vrun) bin=$VRUN subs="" ;;
	esac
	{
		"$bin" --help
		for s in $subs; do "$bin" "$s" --help; done
	} 2>&1 | grep -oE -- '--[a-z][a-z-]*[a-z]' | sort -u >"$T/opts"
	sed 's/\\-/-/g' "$MAN/$prog.1" >"$T/page"
	missing=""
	while read -r opt; do
		grep -qF -- "$opt" "$T/page" || missing="$missing $opt"
	done <"$T/opts"
	check "$prog(1) documents every option of $prog --help ($(wc -l <"$T/opts") options)${missing:+; missing:$missing}" test -z "$missing"
	for s in $subs; do
		check "$prog(1) documents the command $s" grep -qE "^\.(B|BI|TP) +$s\b|^\.B $s$" "$T/page"
	done
done

finish
