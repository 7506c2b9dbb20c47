"""`zoo demo`: the main job, end to end, on the offline numbers task."""

from zoo.runs import demo


def run_demo(args):
    """`zoo demo`: the main job, end to end."""
    demo.run(
        minutes=args.minutes, train_size=args.train_size, test_size=args.test_size,
        seed=args.seed, out=args.out, export_root=args.export_to,
    )
