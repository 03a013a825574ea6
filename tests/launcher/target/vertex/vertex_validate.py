#!/usr/bin/env python3
"""Checks CustomJobs slicectl renders as Vertex AI's customJobs.create
reads them: against api/aiplatform.v1.customjobs.gcloud-528.json with
fake_api.py's checker (unknown names, JSON types, enums, durations, as
Google's JSON-to-proto parser), no output-only field sent, and what
Vertex requires beyond the schema (vertex_fake.py's check_job).

usage: vertex_validate.py JSON_FILE
JSON_FILE holds one CustomJob or an array of them.
Exit 0 valid, 1 invalid (each error on stderr), 2 cannot run.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.normpath(os.path.join(HERE, "..", "..", "..",
						 "fakes")))

import fake_api  # noqa: E402
import vertex_fake  # noqa: E402


def main():
	if len(sys.argv) != 2:
		print(__doc__, file=sys.stderr)
		return 2
	with open(sys.argv[1]) as f:
		doc = json.load(f)
	schemas = vertex_fake.Schemas(vertex_fake.DEFAULT_SCHEMAS)
	bad = 0
	for i, job in enumerate(doc if isinstance(doc, list) else [doc]):
		checker = fake_api.Checker(schemas)
		try:
			checker.check(vertex_fake.JOB, job, "custom_job")
			vertex_fake.check_job(job)
		except fake_api.ApiError as err:
			print("job %d: %s" % (i, err), file=sys.stderr)
			bad += 1
			continue
		if checker.ignored:
			print("job %d: output-only fields sent: %s" %
			      (i, checker.ignored), file=sys.stderr)
			bad += 1
	return 1 if bad else 0


if __name__ == "__main__":
	sys.exit(main())
