"""The YAML reader of kube_fake.py (Python has none in its standard
library): block YAML as controller-gen writes the CRD files, read as a
YAML 1.2 core-schema parser reads it; the kube-fidelity test checks it
against js-yaml on every file of k8s/."""

import re

# ---------------------------------------------------------------- YAML


class YamlError(ValueError):
	pass


_NULL = re.compile(r"~|null|Null|NULL|")
_BOOL = {"true": True, "True": True, "TRUE": True,
	 "false": False, "False": False, "FALSE": False}
_INT = re.compile(r"[-+]?[0-9]+")
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")


def _plain(text):
	"""A plain scalar resolved as YAML 1.2's core schema does."""
	if _NULL.fullmatch(text):
		return None
	if text in _BOOL:
		return _BOOL[text]
	if _INT.fullmatch(text):
		return int(text)
	if re.fullmatch(r"0x[0-9a-fA-F]+", text):
		return int(text, 16)
	if re.fullmatch(r"0o[0-7]+", text):
		return int(text[2:], 8)
	if _FLOAT.fullmatch(text):
		return float(text)
	if re.fullmatch(r"[-+]?\.(inf|Inf|INF)", text):
		return float("-inf") if text[0] == "-" else float("inf")
	if re.fullmatch(r"\.(nan|NaN|NAN)", text):
		return float("nan")
	return text


class _Yaml:
	"""Block YAML as controller-gen writes it: mappings, sequences
	(also at their key's indentation), plain, quoted (spanning lines)
	and block (| > with chomping) scalars, flow {} [] with simple
	items, comments, several documents. Anchors, tags and complex keys
	are refused rather than misread."""

	def __init__(self, text):
		self.lines = text.split("\n")
		self.i = 0

	def fail(self, why):
		raise YamlError("line %d: %s" % (self.i + 1, why))

	@staticmethod
	def indent(line):
		return len(line) - len(line.lstrip(" "))

	def skip(self):
		"""To the next line with content, past blanks and comments."""
		while self.i < len(self.lines):
			s = self.lines[self.i].strip()
			if s and not s.startswith("#"):
				return True
			self.i += 1
		return False

	def documents(self):
		docs, cur = [], []
		for line in self.lines:
			if line.rstrip() in ("---", "...") or line.startswith("--- "):
				docs.append(cur)
				cur = []
			else:
				cur.append(line)
		docs.append(cur)
		out = []
		for d in docs:
			sub = _Yaml("\n".join(d))
			if sub.skip():
				out.append(sub.node(0))
				if sub.skip():
					sub.fail("unexpected text at indentation %d" %
						 sub.indent(sub.lines[sub.i]))
		return out

	def node(self, ind):
		"""The block node starting at the current line, indented ind."""
		line = self.lines[self.i]
		text = line.strip()
		if text.startswith("- ") or text == "-":
			return self.sequence(self.indent(line))
		if self.key_of(text) is not None:
			return self.mapping(self.indent(line))
		# A lone scalar (plain or quoted), possibly over lines.
		return self.scalar_value(text, self.indent(line) - 1)

	def key_of(self, text):
		"""(key, rest) when text is "key: rest" or "key:", else None."""
		if text[:1] in ("'", '"'):
			j = self.closing(text, text[0])
			if j < 0:
				return None
			rest = text[j + 1:]
			if rest.startswith(":") and (len(rest) == 1 or rest[1] == " "):
				return self.quoted(text[:j + 1]), rest[1:].strip()
			return None
		m = re.match(r"([^\s#'\"{}\[\],&*!|>%@`][^:#]*?|[^\s]*?)\s*:(\s|$)",
			     text)
		if not m or text.startswith(("- ", "? ")):
			return None
		return m.group(1), text[m.end():].strip()

	def mapping(self, ind):
		out = {}
		while self.skip():
			line = self.lines[self.i]
			if self.indent(line) != ind:
				if self.indent(line) > ind:
					self.fail("bad indentation")
				break
			text = line.strip()
			if text.startswith("- "):
				break
			kv = self.key_of(text)
			if kv is None:
				self.fail("expected a mapping key")
			key, rest = kv
			if key in out:
				self.fail("duplicate key %r" % key)
			out[key] = self.value(rest, ind, True)
		return out

	def sequence(self, ind):
		out = []
		while self.skip():
			line = self.lines[self.i]
			text = line.strip()
			if self.indent(line) != ind or not (
					text.startswith("- ") or text == "-"):
				if self.indent(line) > ind:
					self.fail("bad indentation")
				break
			rest = text[1:].lstrip(" ")
			if not rest or rest.startswith("#"):
				self.i += 1
				out.append(self.child(ind, False))
				continue
			# "- key: v" opens a mapping at the item's column: read
			# the line again as if it were indented that far.
			col = ind + 1 + (len(text) - 1 - len(rest))
			if rest.startswith(("- ", "-\t")) or rest == "-" or \
					self.key_of(rest) is not None:
				self.lines[self.i] = " " * col + rest
				out.append(self.node(col))
			else:
				out.append(self.value(rest, ind, False))
		return out

	def child(self, ind, in_map):
		"""The node under a key or dash with nothing after it."""
		if not self.skip():
			return None
		line = self.lines[self.i]
		text = line.strip()
		n = self.indent(line)
		if n > ind:
			return self.node(n)
		if in_map and n == ind and (text.startswith("- ") or text == "-"):
			return self.sequence(n)
		return None

	def value(self, rest, ind, in_map):
		"""The value after "key:" or "- " on the current line; ind is
		the key's or dash's indentation."""
		if rest.startswith("#"):
			rest = ""
		if rest == "":
			self.i += 1
			return self.child(ind, in_map)
		if rest[0] in "&*!":
			self.fail("anchors, aliases and tags are not supported")
		if rest[0] in "|>":
			return self.block_scalar(rest, ind)
		return self.scalar_value(rest, ind)

	def scalar_value(self, rest, ind):
		"""A flow, quoted or plain scalar starting with rest on the
		current line; continuation lines are those indented more than
		ind."""
		if rest[0] in "{[":
			self.i += 1
			return self.flow(rest)
		if rest[0] in "'\"":
			text = rest
			q = rest[0]
			while not self.closed(text, q):
				self.i += 1
				if self.i >= len(self.lines):
					self.fail("unterminated quoted scalar")
				text += "\n" + self.lines[self.i]
			self.i += 1
			end = self.closing(text, q)
			tail = text[end + 1:].strip()
			if tail and not tail.startswith("#"):
				self.fail("text after a quoted scalar")
			return self.quoted(text[:end + 1])
		parts = [self.strip_comment(rest)]
		self.i += 1
		while self.i < len(self.lines):
			line = self.lines[self.i]
			s = line.strip()
			if s and (self.indent(line) <= ind or s.startswith("#")):
				break
			if s and self.key_of(s) is not None and \
					self.indent(line) > ind:
				self.fail("a mapping key inside a plain scalar")
			parts.append(self.strip_comment(s) if s else "")
			self.i += 1
		while parts and parts[-1] == "":
			parts.pop()
		text = self.fold(parts)
		return _plain(text) if len(parts) == 1 else text

	@staticmethod
	def strip_comment(s):
		m = re.search(r"\s#", s)
		return (s[:m.start()] if m else s).rstrip()

	@staticmethod
	def fold(parts):
		"""Line folding of flow scalars: one break is a space, n > 1
		breaks are n - 1 newlines."""
		out, blank = "", 0
		for k, p in enumerate(parts):
			if k == 0:
				out = p
				continue
			if p == "":
				blank += 1
				continue
			out += ("\n" * blank if blank else " ") + p
			blank = 0
		return out

	@staticmethod
	def closing(text, q):
		j = 1
		while j < len(text):
			if text[j] == q:
				if q == "'" and text[j + 1:j + 2] == "'":
					j += 2
					continue
				return j
			if q == '"' and text[j] == "\\":
				j += 1
			j += 1
		return -1

	def closed(self, text, q):
		return self.closing(text, q) > 0

	def quoted(self, text):
		q, body = text[0], text[1:-1]
		lines = body.split("\n")
		if len(lines) > 1:
			lines = [lines[0].rstrip(" \t")] + \
				[x.strip(" \t") for x in lines[1:-1]] + \
				[lines[-1].lstrip(" \t")]
			body = self.fold(lines)
		if q == "'":
			return body.replace("''", "'")
		out, j = [], 0
		esc = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "/": "/",
		       "0": "\0", "r": "\r", " ": " ", "b": "\b", "e": "\x1b",
		       "a": "\x07", "f": "\f", "v": "\v", "N": "\x85",
		       "_": "\xa0", "L": "\u2028", "P": "\u2029"}
		while j < len(body):
			c = body[j]
			if c != "\\":
				out.append(c)
				j += 1
				continue
			n = body[j + 1:j + 2]
			if n in esc:
				out.append(esc[n])
				j += 2
			elif n in ("x", "u", "U"):
				w = {"x": 2, "u": 4, "U": 8}[n]
				out.append(chr(int(body[j + 2:j + 2 + w], 16)))
				j += 2 + w
			elif n == "\n":
				j += 2
				while j < len(body) and body[j] in " \t":
					j += 1
			else:
				self.fail("unknown escape \\%s" % n)
		return "".join(out)

	def block_scalar(self, head, ind):
		m = re.fullmatch(r"([|>])([-+]?)([1-9]?)([-+]?)\s*(#.*)?", head)
		if not m:
			self.fail("bad block scalar header %r" % head)
		style, chomp = m.group(1), m.group(2) or m.group(4)
		self.i += 1
		lines = []
		content = None
		if m.group(3):
			content = ind + int(m.group(3))
		while self.i < len(self.lines):
			line = self.lines[self.i]
			if line.strip() == "":
				lines.append("")
				self.i += 1
				continue
			n = self.indent(line)
			if content is None:
				if n <= ind:
					break
				content = n
			if n < content:
				break
			lines.append(line[content:])
			self.i += 1
		# Trailing blank lines belong to chomping, not to the node.
		trail = 0
		while lines and lines[-1] == "":
			lines.pop()
			trail += 1
		if style == "|":
			text = "\n".join(lines)
		else:
			text = ""
			prev_more = False
			for k, x in enumerate(lines):
				more = x.startswith((" ", "\t"))
				if k == 0:
					text = x
				elif x == "":
					text += "\n"
				elif more or prev_more or text.endswith("\n"):
					text += ("\n" if not text.endswith("\n") or
						 more or prev_more else "") + x
				else:
					text += " " + x
				prev_more = more and x != ""
		if not lines:
			return "" if chomp != "+" else "\n" * trail
		if chomp == "-":
			return text
		if chomp == "+":
			return text + "\n" + "\n" * trail
		return text + "\n"

	def flow(self, text):
		"""{} [] and flow collections of plain or quoted scalars on
		one line."""
		t = self.strip_comment(text).strip()
		if t in ("{}", "[]"):
			return {} if t == "{}" else []
		if t[0] == "[" and t[-1] == "]":
			return [self.flow_scalar(x) for x in
				self.split_flow(t[1:-1])]
		if t[0] == "{" and t[-1] == "}":
			out = {}
			for item in self.split_flow(t[1:-1]):
				kv = self.key_of(item)
				if kv is None:
					self.fail("bad flow mapping item %r" % item)
				out[kv[0]] = self.flow_scalar(kv[1])
			return out
		self.fail("flow collections over lines are not supported")

	def split_flow(self, body):
		items, cur, q = [], "", None
		for c in body:
			if q:
				cur += c
				if c == q:
					q = None
			elif c in "'\"":
				q = c
				cur += c
			elif c in "[]{}":
				self.fail("nested flow collections are not supported")
			elif c == ",":
				items.append(cur.strip())
				cur = ""
			else:
				cur += c
		if cur.strip():
			items.append(cur.strip())
		return items

	def flow_scalar(self, s):
		if s[:1] in ("'", '"'):
			return self.quoted(s)
		return _plain(s)


def load_yaml(text):
	"""The documents of a YAML text (a list), as a YAML 1.2 core-schema
	parser gives them, for the subset _Yaml reads."""
	return _Yaml(text).documents()
