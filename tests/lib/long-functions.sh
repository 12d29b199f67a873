#!/usr/bin/env bash
# Lists every function longer than a limit (default 80 lines) outside tests, as
# `file:line name length`, longest first, and fails when there is one. Called by
# tests/run.sh so that the rule "no function over 80 lines outside tests" stays kept.
#
# Usage: tests/lib/long-functions.sh [max-lines] [dir-or-file...]
#
# Not a Rust parser: comments, string and char literals are blanked, then each `fn NAME`
# item runs from its `fn` line to the `}` that closes the first `{` after its signature
# (a `;` first means a body-less declaration). Signatures hold no braces (generics and
# where-clauses use `<>` and `,`), so that is enough for this codebase. Skipped as tests:
# items under `#[cfg(test)]` (test modules, test-only impls), files named `tests.rs`,
# `tests_*.rs` or `*_tests.rs`, and files a `#[cfg(test)] mod x;` declares.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

max=${1:-80}
shift || true
roots=("$@")
if ((${#roots[@]} == 0)); then
  roots=(agent/src controlplane/src controlplane/api/src proto kubectl-plugin/src tests/src tests/csi-hostpath/src)
fi

find "${roots[@]}" -name '*.rs' -print0 | sort -z | perl -0 -e '
use strict;
use warnings;
my $max = shift;
my @files = map { chomp; $_ } <STDIN>;
my %declared_test_only = map { $_ => 1 } map { test_only_modules($_) } @files;
my @long;
for my $file (@files) {
  next if $declared_test_only{$file};
  next if $file =~ m{(^|/)(tests|tests_\w+|\w+_tests)\.rs$};
  push @long, long_functions($file);
}
for my $hit (sort { $b->[2] <=> $a->[2] || $a->[0] cmp $b->[0] } @long) {
  printf "%s %s %d lines\n", @$hit;
}
exit(@long ? 1 : 0);

sub slurp {
  my ($file) = @_;
  open my $fh, "<:encoding(UTF-8)", $file or die "cannot read $file: $!\n";
  local $/;
  return scalar <$fh>;
}

# Files that `#[cfg(test)] [#[path = "..."]] mod name;` in $file declares.
sub test_only_modules {
  my ($file) = @_;
  my $text = slurp($file);
  my ($dir, $stem) = $file =~ m{^(.*)/([^/]+)\.rs$} or return ();
  my $module_dir = $stem =~ /^(mod|lib|main)$/ ? $dir : "$dir/$stem";
  my @found;
  while ($text =~ /#\[cfg\(test\)\]\s*((?:#\[[^\]]*\]\s*)*)(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;/g) {
    my ($attributes, $name) = ($1, $2);
    if ($attributes =~ /#\[path\s*=\s*"([^"]+)"\]/) {
      push @found, "$dir/$1";
    } else {
      push @found, "$module_dir/$name.rs", "$module_dir/$name/mod.rs";
    }
  }
  return @found;
}

# The text with comments and string/char literals replaced by spaces, newlines kept, so
# that offsets and line numbers still match the file.
sub blank_literals {
  my ($text) = @_;
  my $blank = sub { my $s = shift; $s =~ s/[^\n]/ /g; $s };
  $text =~ s{
      (//[^\n]*)
    | (/\*(?:(?>[^/*]+)|/(?!\*)|\*(?!/)|(?-1))*\*/)
    | (\bb?r(\#*)"(?:.|\n)*?"\4)
    | (\bb?"(?:[^"\\]|\\.|\\\n)*")
    | ((?<![\w\x27])b?\x27(?:\\(?:u\{[0-9a-fA-F]+\}|x..|.)|[^\\\x27\n])\x27)
    | ("(?:[^"\\]|\\.|\\\n)*")
  }{ $blank->($&) }gex;
  return $text;
}

# Offset of the `}` matching the `{` at $open, or undef.
sub matching_brace {
  my ($text, $open) = @_;
  my $depth = 0;
  pos($text) = $open;
  while ($text =~ /([{}])/g) {
    $depth += $1 eq "{" ? 1 : -1;
    return pos($text) - 1 if $depth == 0;
  }
  return undef;
}

sub line_of {
  my ($text, $offset) = @_;
  return 1 + (substr($text, 0, $offset) =~ tr/\n//);
}

sub long_functions {
  my ($file) = @_;
  my $text = blank_literals(slurp($file));
  my @test_spans;
  while ($text =~ /#\[cfg\((?:all\()?test\b[^\]]*\]/g) {
    my $after = pos($text);
    my $rest = substr($text, $after);
    $rest =~ /[{;]/ or next;
    next if $& eq ";";
    my $open = $after + $-[0];
    my $close = matching_brace($text, $open) // length($text);
    push @test_spans, [$after, $close];
    pos($text) = $after;
  }
  my @long;
  while ($text =~ /\bfn\s+(\w+)/g) {
    my ($name, $start) = ($1, $-[0]);
    my $after_name = pos($text);
    next if grep { $start >= $_->[0] && $start <= $_->[1] } @test_spans;
    my $rest = substr($text, $after_name);
    $rest =~ /[{;]/ or next;
    next if $& eq ";";
    my $open = $after_name + $-[0];
    my $close = matching_brace($text, $open) // next;
    my ($first, $last) = (line_of($text, $start), line_of($text, $close));
    my $length = $last - $first + 1;
    push @long, ["$file:$first", $name, $length] if $length > $max;
    pos($text) = $after_name;
  }
  return @long;
}
' "$max" || {
  status=$?
  echo "each function above is longer than $max lines: split it into named steps" >&2
  exit "$status"
}
