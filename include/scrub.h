/*
 * scrub: take a session's secrets out of what the upstream sends back.
 *
 * An upstream may echo the secret it was sent (httpbin-style /headers,
 * error pages, debug output, Set-Cookie, Location). Security invariant 1
 * says the child never receives it, so every response head and body passes
 * through here before the child sees a byte: each occurrence of a key's
 * secret, in any of the forms below, is replaced.
 *
 * Forms found, for a secret S of L bytes (matching is exact, byte for byte,
 * apart from the choices listed):
 *
 *  1. raw: S itself. Replaced by the key's placeholder.
 *
 *  2. decoded: input that decodes to S, one secret byte at a time, where
 *     each byte of S may stand in any of these spellings, mixed freely:
 *       - the byte itself;
 *       - "%XX", hex digits in either case (also mixed);
 *       - "+" for a space (application/x-www-form-urlencoded);
 *       - a JSON escape: \" \\ \/ \b \f \t (\n, \r cannot occur in S);
 *       - "\uXXXX", hex in either case, read as the byte XX when S has that
 *         byte there (U+0000..U+00FF: Latin-1, which is how Python and Node
 *         hand header bytes to a JSON encoder), else as the UTF-8 bytes of
 *         the code point (a surrogate pair counts as one code point).
 *     So every percent-encoder's choice of safe set (encodeURIComponent,
 *     Python quote/quote_plus, PHP urlencode/rawurlencode, our own inject
 *     of all but unreserved), either hex case and JSON string escaping
 *     (json.dumps, Go's \u0026 for '&', PHP's \/) are all one pattern.
 *     Replaced by the placeholder. A "%" followed by two hex digits, or a
 *     "\" followed by an escape letter, is read as an escape when that
 *     escape gives the secret byte expected there, else as itself. Deciding
 *     each spelling on the spot keeps the scan linear; it misreads only a
 *     secret holding "%25", "\\" or "\u005c" spelled raw next to other
 *     escaped bytes (fully raw is still form 1), and the character U+00C3
 *     escaped as "\u00c3" in a UTF-8 secret (read as the Latin-1 byte).
 *
 *  3. base64, standard or URL-safe alphabet (or a mix of them), at each of
 *     the three byte alignments the secret can have inside a longer base64
 *     string (preceded by 0, 1 or 2 bytes modulo 3, e.g. "Basic"
 *     credentials "user:S"). Each '+' or '/' may also be written the way
 *     encoders escape it, mixed freely: "\/" (PHP's json_encode by
 *     default, others as an option), "\u002B" (.NET's System.Text.Json by
 *     default) or "\u002F", hex in either case, in JSON; "%2B", "%2F",
 *     either case, in a URL or a form body. Each escape counts as the one character it stands for.
 *     For an alignment, the "core" is the run of characters whose six bits
 *     all come from S; it is looked for. When it is found it is replaced
 *     by as many 'A's (all bits zero), and the partial character on each
 *     side of it (two or four bits of S next to bits of the neighbouring
 *     bytes), when it is a base64 character or an escape of one, becomes
 *     the character with exactly its secret bits cleared, keeping the
 *     neighbour's (both secrets' bits when two occurrences touch and it is
 *     the edge of each). The number of characters and the alphabet are
 *     unchanged, so the string stays valid base64 and decodes to the same
 *     bytes with the secret's bytes turned to NUL: no secret bit is left,
 *     no neighbouring byte is damaged, and a reader sees where the secret
 *     was. Only its length in bytes may shrink, where escapes became plain
 *     characters ('A's and masked characters are never '+' or '/', so need
 *     no escaping). (The placeholder cannot go there: its base64 has a
 *     different length, and re-encoding a whole token needs its
 *     boundaries, which a streaming scan does not know.) Escapes are read
 *     on the spot, like those of form 2: a "\\" (an escaped backslash)
 *     just before a '/' is read as "\/", so where a core or its edge
 *     begins there, the JSON string is left with an invalid escape; the
 *     secret's bits are gone all the same. Cores shorter than
 *     SCRUB_B64_CORE_MIN characters are not looked for: too many innocent
 *     base64 strings would match. That leaves the base64 of secrets of 1 to
 *     4 bytes unscrubbed; those 8..32 bits are guessable anyway.
 *
 * Raw and decoded forms are scrubbed whatever the secret's length, even for
 * a 1-byte secret that mangles every response: failing closed is the only
 * choice that keeps invariant 1, and a secret that short is the user's
 * risk. A replaced head still splits into the same lines (secrets hold no
 * CR or LF, neither do placeholders or base64), though it may no longer
 * parse; the caller must then refuse it.
 *
 * Not found: double encoding (%2525), HTML entities, hex dumps, quoted-
 * printable, changes of letter case (an upper-cased echo), UTF-16, base64
 * broken by line breaks, base64 with escapes of characters other than '+'
 * and '/' (no encoder writes "\u0041" for 'A') or escaped twice, base64
 * of an already encoded form, compressed bodies (the proxy asks for and
 * insists on the identity coding), and a secret split by anything the
 * upstream inserts.
 *
 * Semantics: the input is cut into non-overlapping matches, leftmost first
 * and at a position the longest (ties: the key given first); scanning
 * resumes after a match, so replacements are never scanned again. Output
 * depends only on the whole input, never on how it is split into feeds.
 *
 * Cost: each pair of input bytes is looked up in a 64 Kbit table of the
 * pairs a match can begin with; patterns are tried only there, from
 * buckets chosen by the first byte (or the byte an escape stands for).
 * Data that often looks like the start of a secret costs up to maxlen
 * comparisons a byte; only an upstream that knows the secret can aim that.
 *
 * Secret material (copies of the secrets, their base64 cores, the tables
 * derived from them) lives in sodium memory, and so does a stream's
 * buffer, which holds input bytes that may be part of a secret; all of it
 * is wiped when freed.
 *
 * A stream holds back a constant amount of input, scrub_set_maxlen() bytes
 * (less only right after a match or before that much has arrived): not just
 * what might begin a match, since a child able to make the upstream reflect
 * chosen bytes and then pause would see from the delay whether its guess is
 * a prefix of the secret. Data therefore reaches the child up to that many
 * bytes late, all of it at scrub_stream_finish().
 */
#ifndef VRUN_SCRUB_H
#define VRUN_SCRUB_H

#include <stddef.h>
#include <stdint.h>

#include "inject.h"

/* Shortest base64 core looked for (6 characters = 36 bits of secret). */
#define SCRUB_B64_CORE_MIN 6

struct scrub_set;
struct scrub_stream;

/*
 * Where scrubbed output goes: len (> 0) bytes at p, valid only during the
 * call. Return 0, or a negative VERR_* code to stop: the scrubbing call
 * returns that code.
 */
typedef int (*scrub_out_fn)(void *arg, const void *p, size_t len);

/*
 * Patterns for nkeys keys (keys may be NULL when nkeys is 0: a set that
 * changes nothing). Secrets and placeholders are copied; keys need not
 * outlive the set. *out cleared on entry. Returns 0, VERR_TOO_MANY (over
 * INJECT_KEYS_MAX keys), VERR_SECRET_EMPTY, VERR_SECRET_BYTES or
 * VERR_TOO_LARGE (a secret the vault would refuse), VERR_INVALID (NULL
 * argument or a placeholder outside INJECT_PLACEHOLDER_*), VERR_NOMEM.
 */
int scrub_set_new(const struct inject_key *keys, size_t nkeys, struct scrub_set **out);

/* Wipe and release; NULL is fine. Free every stream on the set first. */
void scrub_set_free(struct scrub_set *set);

/*
 * The most a stream holds back (0 for a set without keys): the last R - 1
 * bytes, where a match may begin that needs more input (R: the longest
 * input one match can read from where it starts), and the 6 bytes before
 * them (the spelling of the base64 character a match beginning right
 * after may have to mask, "\u002B" at most). R is 6 bytes per byte of the
 * longest secret ("\u00XX" each), or 6 per character of a base64 core and
 * its trailing edge ("\u002B" each) when that is more: about 8 per secret
 * byte. It depends on the secrets' lengths only, never on their bytes.
 */
size_t scrub_set_maxlen(const struct scrub_set *set);

size_t scrub_set_nkeys(const struct scrub_set *set);

/*
 * A stream for one body (or several bodies one after the other, each ended
 * by scrub_stream_finish). The set must outlive it. *out cleared on entry.
 * Returns 0, VERR_INVALID or VERR_NOMEM.
 */
int scrub_stream_new(const struct scrub_set *set, struct scrub_stream **out);

/*
 * Scrub len more bytes of the body and pass on the output that is decided,
 * through zero or more calls of out. Returns 0, VERR_INVALID, or the code
 * out returned; after an error the stream refuses every call but
 * scrub_stream_free (what it held is wiped).
 */
int scrub_stream_feed(struct scrub_stream *st, const void *in, size_t len, scrub_out_fn out,
                      void *arg);

/*
 * End of the body: scrub and pass on everything held back, then leave the
 * stream empty, ready for the next body (counts go on adding up). A body
 * that ends early (connection lost) should not be finished: free the
 * stream, since what it holds may be the first part of a secret. Returns as
 * scrub_stream_feed.
 */
int scrub_stream_finish(struct scrub_stream *st, scrub_out_fn out, void *arg);

/* Input bytes held back right now (at most scrub_set_maxlen()). */
size_t scrub_stream_held(const struct scrub_stream *st);

/* Replacements made so far for keys[key] (0 when key is out of range), and in all. */
uint64_t scrub_stream_count(const struct scrub_stream *st, size_t key);
uint64_t scrub_stream_total(const struct scrub_stream *st);

/* Wipe and release; NULL is fine. */
void scrub_stream_free(struct scrub_stream *st);

/*
 * One-shot scrub of a complete message part (a response head). Same output
 * as a stream fed the same bytes and finished, without holding anything
 * back. counts is NULL or scrub_set_nkeys() entries, cleared on entry, then
 * the replacements per key. Returns 0, VERR_INVALID, or the code out
 * returned.
 */
int scrub_buffer(const struct scrub_set *set, const void *in, size_t len, scrub_out_fn out,
                 void *arg, uint64_t *counts);

/*
 * The same into a new malloc'd buffer (it holds no secret), NUL-terminated
 * for convenience; *out and *outlen cleared on entry. Returns 0,
 * VERR_INVALID or VERR_NOMEM.
 */
int scrub_buffer_dup(const struct scrub_set *set, const void *in, size_t len, char **out,
                     size_t *outlen, uint64_t *counts);

#endif
