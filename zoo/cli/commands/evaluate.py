"""`zoo evaluate`, `zoo compare` and `zoo predict`: score a run on its test split, test whether
one run beats another, answer new inputs."""

import json
import sys

from zoo import runs
from zoo.cli import choices
from zoo.cli.arguments import EXIT_FAILED, UserError
from zoo.decode.sampling import Sampling
from zoo.export import ctranslate2_runtime, runtimes


def run_evaluate(args):
    """`zoo evaluate`: score a run on its test split."""
    result = runs.evaluate(
        args.run_dir, checkpoint=args.checkpoint, beam_size=args.beam_size, alpha=args.alpha,
        limit=args.limit, batch_size=args.batch_size, quiet=args.json,
        bootstrap=args.confidence,
    )
    if args.json:
        print(json.dumps(result, indent=2))


def run_compare(args):
    """`zoo compare`: whether one run beats another on the same test split."""
    result = runs.compare(
        args.run_a, args.run_b, checkpoint=args.checkpoint, beam_size=args.beam_size,
        alpha=args.alpha, limit=args.limit, batch_size=args.batch_size, samples=args.samples,
        quiet=args.json,
    )
    if args.json:
        print(json.dumps(result, indent=2))


def _sampling(args):
    """`--sample` and its options as a `Sampling` (None without `--sample`)."""
    given = {name: getattr(args, name) for name in ("temperature", "top_p", "seed")
             if getattr(args, name) is not None}
    if not args.sample:
        if given:
            raise UserError(f"--{next(iter(given)).replace('_', '-')} needs --sample")
        return None
    return Sampling(top_k=args.top_k, **given)


def run_predict(args):
    """`zoo predict`: answer new inputs with a run or an export; exit code 1 when some failed."""
    sampling = _sampling(args)
    top_k = choices.IMAGE_CLASSES if sampling is not None or args.top_k is None else args.top_k
    if ctranslate2_runtime.resolve(args.path) is not None:  # a Transformer for CTranslate2
        if sampling is not None:
            raise UserError(f"{args.path} is a CTranslate2 export: --sample is for runs and "
                            "SavedModels (CTranslate2's sampler draws other samples)")
        results = ctranslate2_runtime.predict(args.path, args.inputs, beam_size=args.beam_size,
                                              alpha=args.alpha)
    elif runtimes.resolve(args.path) is not None:  # a LiteRT, ONNX or OpenVINO export of a ViT
        if sampling is not None:
            raise UserError(f"{args.path} is an image model; sampling is for translation models")
        results = runtimes.predict(args.path, args.inputs, top_k=top_k)
    else:
        results = runs.predict(
            args.path, args.inputs, beam_size=args.beam_size, alpha=args.alpha, top_k=top_k,
            checkpoint=args.checkpoint, sampling=sampling,
        )
    if sampling is not None and results and "seed" in results[0]:  # to sample the same again
        print(f"zoo predict: sampled with --seed {results[0]['seed']}", file=sys.stderr)
    failed = [result for result in results if "error" in result]
    for result in failed:  # one line each; the other inputs are still answered
        print(f"zoo predict: error: {result['input']}: {result['error']}", file=sys.stderr)
    if args.json:
        print(json.dumps(results, indent=2, ensure_ascii=False))
    else:
        for result in results:
            if "translation" in result:
                print(f"{result['input']}\n  -> {result['translation']}")
            elif "classes" in result:
                classes = ", ".join(f"{name} {100 * p:.1f}%" for name, p in result["classes"])
                print(f"{result['input']}: {classes}")
    return EXIT_FAILED if failed else 0
