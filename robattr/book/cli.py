"""The ``robattr`` command: list, run, build and sweep the book's notebooks (on top of
every other module of :mod:`robattr.book`)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from robattr.version import __version__

EPILOG = """\
examples:
  robattr list                                   notebooks and their parameters
  robattr run example/digits_saliency -p epochs 1
  robattr build                                  execute what changed (quick profile), build HTML
  robattr build --profile paper --only 'wang2020/*'
  robattr build --jobs 2                         two notebooks at once on this machine
  robattr build --profile paper --executor ray --address auto     on a running Ray cluster
  robattr sweep example/digits_saliency -p epochs 2,5,15 -p arch mlp,cnn --jobs 2
  robattr plan --profile paper                   data, models to train and time, before a build
  robattr train --profile medium --jobs 2        train its models first, two at a time
  robattr zoo list --profile medium               its models: trained (accuracy vs target) or not
  robattr zoo export kept --profile medium       its models (or checkpoints) into kept/,
  robattr zoo import kept                          and into another machine's zoo
  robattr data fetch mnist cifar10               download datasets (needs a network), decode once
  robattr data list                              which datasets are present, and where

parameters: each notebook declares them in its parameters cell, one per line,
            `name = default  # RULE | help` (robattr list shows them); a value that breaks
            its rule, or an unknown name, is refused before papermill starts.
profiles: quick (default: sklearn digits, small models, 2 CPU cores), medium (the
          papers' datasets at CPU size), paper (the papers' datasets and sample counts,
          a GPU), smoke (tests).
environment: ROBATTR_DATA (datasets), ROBATTR_CACHE (model zoo; share it between
             Ray nodes so each model is trained once), ROBATTR_ROOT (book).
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="robattr", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Execute the robattr book's notebooks with papermill and build it "
                    "with jupyter-book.")
    p.add_argument("--version", action="version", version=f"robattr {__version__}")
    p.add_argument("--root", help="the book's folder (default: found from the working directory)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    ls = sub.add_parser("list", help="list notebooks and their parameters")
    ls.add_argument("--profile", default="quick", help="show this profile's values (default quick)")

    run = sub.add_parser("run", help="execute one notebook with parameters, then rebuild the HTML")
    run.add_argument("notebook", help="key (example/digits_saliency) or path of a notebook")
    _pairs(run, "-p", "--parameter", "VALUE",
           "set a parameter (VALUE is read as YAML and checked against the rule the notebook "
           "declares for NAME before anything runs)")
    run.add_argument("--profile", default="quick", help="base parameters (default quick)")
    run.add_argument("-o", "--output", help="write the executed notebook here instead of the book")
    run.add_argument("--no-html", action="store_true", help="do not rebuild the HTML book")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")

    b = sub.add_parser("build", help="execute changed notebooks and build the HTML book")
    b.add_argument("--profile", default="quick",
                   help="quick (default), medium, paper, smoke or a .yml path")
    b.add_argument("--only", metavar="PATTERN", help="glob over notebook keys, e.g. 'wang2020/*'")
    _pairs(b, "-p", "--parameter", "VALUE", "override a parameter in every selected notebook")
    b.add_argument("--force", action="store_true", help="re-execute even unchanged notebooks")
    b.add_argument("--no-html", action="store_true", help="execute only, do not run jupyter-book")
    b.add_argument("--html-only", action="store_true", help="run jupyter-book only")
    b.add_argument("--no-progress", action="store_true", help="no progress bars")
    b.add_argument("--keep-reference", nargs="?", const="", default=None, metavar="NAME",
                   help="keep each notebook's results as reference/NAME/ (default NAME: the "
                        "profile's name), shown beside later builds")
    _executor_args(b)

    sw = sub.add_parser("sweep", help="run one notebook over a grid of parameter values")
    sw.add_argument("notebook", help="key (example/digits_saliency) or path of a notebook")
    _pairs(sw, "-p", "--parameter", "VALUES",
           "sweep a parameter over comma-separated values (each read as YAML; a list value "
           "keeps its brackets: '[1,2],[4]')")
    _pairs(sw, "-s", "--set", "VALUE", "fix a parameter for every run")
    sw.add_argument("--profile", default="quick", help="base parameters (default quick)")
    sw.add_argument("-o", "--output", help="folder for the runs (default sweeps/<notebook key>)")
    sw.add_argument("--no-figure", action="store_true", help="do not draw summary.png")
    _executor_args(sw)

    pl = sub.add_parser("plan", help="what a profile will cost before it runs: data, models "
                                     "to train, estimated time, references")
    pl.add_argument("--profile", default="quick",
                    help="quick (default), medium, paper, smoke or a .yml path")
    pl.add_argument("--only", metavar="PATTERN", help="glob over notebook keys, e.g. 'wang2020/*'")
    pl.add_argument("--models", action="store_true",
                    help="one line per zoo model: cached (with its recorded seconds per epoch) "
                         "or to train (with its estimate)")
    pl.add_argument("--jobs", type=int, default=1, metavar="N",
                    help="also estimate the wall time of `robattr build --jobs N` (N notebooks "
                         "at a time; a notebook waits for the models another one trains) and of "
                         "`robattr train --jobs N` then the build, each worker priced on its "
                         "share of the cores")
    pl.add_argument("--json", action="store_true", help="print the plan as JSON")
    pl.add_argument("--check", action="store_true",
                    help="compare the estimates with the seconds of the book's last build "
                         "of this profile, and the training estimates with the seconds per "
                         "epoch the zoo recorded (with --models: per model)")
    tr = sub.add_parser("train", help="train the zoo models a profile's notebooks ask for, "
                                      "before its build (resumes interrupted trainings)")
    tr.add_argument("--profile", default="quick",
                    help="quick (default), medium, paper, smoke or a .yml path")
    tr.add_argument("--only", metavar="PATTERN", help="glob over notebook keys, e.g. 'wang2020/*'")
    tr.add_argument("--threads", type=int, metavar="N",
                    help="CPU threads for training (default: torch's, one per core; with "
                         "--jobs, per model: the cores shared out)")
    tr.add_argument("--jobs", type=int, default=1, metavar="N",
                    help="train N models at a time, each in its own process on its share of "
                         "the cores (a student once its teacher is trained); whether that "
                         "beats one model at a time on every core depends on the machine: "
                         "benchmarks/training.py --jobs N measures it")
    tr.add_argument("--no-progress", action="store_true", help="no progress bars")
    tr.add_argument("--cheapest-first", action="store_true",
                    help="train the models robattr plan estimates cheapest first (a teacher "
                         "before its student), not in the order the notebooks ask for them")
    zo = sub.add_parser("zoo", help="carry trained models, and trainings in progress, from "
                                    "one machine's zoo to another's")
    zsub = zo.add_subparsers(dest="zoo_command", required=True, metavar="ACTION")
    ex = zsub.add_parser("export", help="copy the models a profile's notebooks ask for (or the "
                                        "checkpoints of their trainings) into a folder")
    ex.add_argument("folder", metavar="DIR")
    ex.add_argument("--profile", default="quick",
                    help="quick (default), medium, paper, smoke or a .yml path")
    ex.add_argument("--only", metavar="PATTERN", help="glob over notebook keys, e.g. 'wang2020/*'")
    ls = zsub.add_parser("list", help="the models a profile's notebooks ask for: trained (with "
                                      "its test accuracy beside its accuracy target), in "
                                      "progress, or not trained")
    ls.add_argument("--profile", default="quick",
                    help="quick (default), medium, paper, smoke or a .yml path")
    ls.add_argument("--only", metavar="PATTERN", help="glob over notebook keys, e.g. 'wang2020/*'")
    ls.add_argument("--markdown", action="store_true", help="print a Markdown table")
    im = zsub.add_parser("import", help="copy a folder written by `zoo export` into this zoo "
                                        "(each file checked; a training goes on from its "
                                        "checkpoint)")
    im.add_argument("folder", metavar="DIR")
    da = sub.add_parser("data", help="fetch the papers' datasets, or list which are present")
    dsub = da.add_subparsers(dest="data_command", required=True, metavar="ACTION")
    fe = dsub.add_parser("fetch", help="download datasets into the data root (needs a network) "
                                       "and build their decoded caches")
    fe.add_argument("names", nargs="+", metavar="NAME",
                    help="mnist, fashion_mnist, cifar10 or flowers102")
    fe.add_argument("--data-root", metavar="DIR",
                    help="where to put them (default: $ROBATTR_DATA, else the cache folder)")
    dl = dsub.add_parser("list", help="which datasets are present, and where")
    dl.add_argument("--data-root", metavar="DIR", help="as for fetch")
    return p


def _data(args) -> int:
    """``robattr data fetch|list``: the datasets, outside any book folder."""
    from robattr import data

    root = data.data_root(args.data_root)
    if args.data_command == "list":
        for name in data.DATASETS:
            where = "ships with scikit-learn" if name == "digits" else str(root)
            print(f"{name:14s} {'present' if data.available(name, root) else 'missing':8s} {where}")
        return 0
    unknown = [n for n in args.names if n not in data.DATASETS or n == "digits"]
    if unknown:
        raise ValueError(f"cannot fetch {', '.join(unknown)}: choose from "
                         f"{', '.join(n for n in data.DATASETS if n != 'digits')}")
    for name in args.names:
        for split in ("train", "test"):
            ds = data.load(name, split, root=root, download=True)
            print(f"{name} {split}: {len(ds)} images in {root}")
    return 0


def _pairs(p: argparse.ArgumentParser, short: str, long: str, value: str, help: str) -> None:
    """A repeatable ``NAME VALUE`` option (``-p eps 0.1 -p k 4``), collected as a list."""
    p.add_argument(short, long, nargs=2, action="append", default=[], metavar=("NAME", value),
                   help=help)


def _executor_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="where notebooks run: this machine (default) or a Ray cluster")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="local: N worker processes (default 1: one at a time), each kernel "
                        "capped at cores/N threads unless OMP_NUM_THREADS is set; "
                        "ray: at most N tasks in flight (default 1; 0 = all at once)")
    p.add_argument("--address", metavar="ADDR",
                   help="ray: the cluster to join ('auto', 'HOST:PORT', 'ray://HOST:10001'); "
                        "default: start a private local Ray")


def _overrides(pairs, nb=None) -> dict:
    from robattr.book.params import ParameterError, read_yaml
    from robattr.book.profiles import parse_value

    out = {}
    for name, text in pairs:
        if nb is not None:
            if name not in nb.parameters:
                raise ParameterError(f"{nb.key}: unknown parameter {name!r}; valid parameters: "
                                     + ", ".join(nb.parameters))
            out[name] = parse_value(text, nb.parameters[name], nb.key)
        else:
            out[name] = read_yaml(text)
    return out


def _list(root: Path, profile: str) -> int:
    from robattr.book import notebooks, profiles

    prof = profiles.load_profile(profile)
    for nb in notebooks.discover(root):
        values = profiles.resolve(nb, prof)
        print(f"{nb.key}    (notebooks/{nb.key}.ipynb)")
        width = max((len(n) for n in nb.parameters), default=0)
        for name, param in nb.parameters.items():
            shown = repr(values[name])
            mark = "" if values[name] == param.default else f"  [{profile}; default {param.default!r}]"
            print(f"    {name:<{width}} = {shown}{mark}    # {param.rule.text} | {param.help}")
    return 0


def _run(root: Path, args) -> int:
    from robattr.book import builder, html, notebooks, profiles

    nb = notebooks.find(args.notebook, notebooks.discover(root))
    params = profiles.resolve(nb, args.profile, _overrides(args.parameter, nb))
    failure = builder.run_one(nb, params, root=root, profile=args.profile,
                              output=Path(args.output) if args.output else None,
                              progress=not args.no_progress)
    if failure is not None:
        print(f"robattr: {failure}", file=sys.stderr)
        return 1
    target = args.output or nb.output(root / "book")
    print(f"executed {nb.key} -> {target}")
    if not (args.no_html or args.output):
        html.build_html(root)
    return 0


def _build(root: Path, args) -> int:
    from robattr.book import builder, html

    if args.html_only:
        html.build_html(root)
        return 0
    report = builder.build(root, profile=args.profile, only=args.only,
                           overrides=_overrides(args.parameter), force=args.force,
                           html=not args.no_html, progress=not args.no_progress,
                           executor=args.executor, jobs=args.jobs, address=args.address,
                           keep_reference=_reference_name(args))
    return _failures(report.failed, "notebook(s)")


def _reference_name(args) -> str | None:
    """The name ``--keep-reference [NAME]`` asks for: NAME, else the profile's name."""
    if args.keep_reference is None:
        return None
    return args.keep_reference or Path(args.profile).stem


def _failures(failed: list, what: str) -> int:
    """Print the failures (notebook, cell, error) to stderr; the exit code."""
    if failed:
        print(f"robattr: {len(failed)} {what} failed:", file=sys.stderr)
        for failure in failed:
            print(f"  {failure}", file=sys.stderr)
    return 1 if failed else 0


def _sweep(root: Path, args) -> int:
    from robattr.book import notebooks
    from robattr.book.sweep import sweep

    nb = notebooks.find(args.notebook, notebooks.discover(root))
    report = sweep(nb.key, dict(args.parameter), root=root, profile=args.profile,
                   fixed=_overrides(args.set, nb), output=args.output, executor=args.executor,
                   jobs=args.jobs, address=args.address, figure=not args.no_figure)
    return _failures(report.failed, "run(s)")


def _plan(root: Path, args) -> int:
    import json

    from robattr.book import plan, plan_check

    def log(msg):
        print(msg, file=sys.stderr)

    if args.check:
        rows = plan_check.check_against_stamps(root, args.profile, args.only, log=log)
        train = plan_check.check_training(log=log)
        if args.json:
            print(json.dumps({"notebooks": rows, "training": train}, indent=1))
        else:
            print(plan_check.format_check(rows, args.profile))
            print(plan_check.format_training_check(train, args.models))
        return 0
    if args.jobs < 1:
        raise SystemExit(f"robattr plan: --jobs must be >= 1, got {args.jobs}")
    p = plan.plan(root, args.profile, args.only, log=log)
    worker = (plan.plan(root, args.profile, args.only, log=log,
                        threads=plan.worker_threads(args.jobs)) if args.jobs > 1 else p)
    if args.json:
        d = p.to_dict()
        if args.jobs > 1:
            d["with_jobs"] = plan.jobs_seconds(worker, args.jobs)
        print(json.dumps(d, indent=1))
    else:
        print(plan.format_table(p, args.models, args.jobs, worker))
    return 0


def _train(root: Path, args) -> int:
    from robattr.book import pretrain

    if args.threads is not None:
        if args.threads < 1:
            raise ValueError(f"--threads must be >= 1, got {args.threads}")
        import torch

        torch.set_num_threads(args.threads)
    if args.jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {args.jobs}")
    pretrain.pretrain(root, args.profile, args.only, progress=not args.no_progress,
                      order="cheapest" if args.cheapest_first else "notebooks",
                      jobs=args.jobs, threads=args.threads)
    return 0


def _zoo(root: Path, args) -> int:
    """``robattr zoo list|export|import``: what the zoo holds of a profile's models; models
    and checkpoints between zoo caches."""
    from robattr import zoo
    from robattr.zoo import transfer

    if args.zoo_command == "list":
        from robattr.book import zoo_status

        rows = zoo_status.statuses(root, args.profile, args.only)
        print(f"robattr zoo list: profile {args.profile}, zoo {zoo.zoo_dir()}")
        print("\n".join(zoo_status.table(rows, markdown=args.markdown)))
        print(zoo_status.summary(rows))
        return 0
    if args.zoo_command == "export":
        from robattr.book.pretrain import requested

        models = requested(root, args.profile, args.only)
        done = transfer.export_keys([m.key for m in models], args.folder)
        print(f"robattr zoo export: {done.summary()} of the {len(models)} model(s) of profile "
              f"{args.profile} -> {args.folder}")
    else:
        done = transfer.import_folder(args.folder)
        print(f"robattr zoo import: {done.summary()} -> {zoo.zoo_dir()}")
    for key, epochs in done.checkpoints.items():
        print(f"  {key[:12]}... in progress: {epochs} epoch(s) done")
    for name, why in done.refused.items():
        print(f"  refused {name}: {why}", file=sys.stderr)
    return 1 if done.refused else 0


def _protect_values(argv: list[str]) -> list[str]:
    """``-p lam -1e-6``: argparse would read a value that starts with '-' (other than a
    plain negative number) as an option; a leading space keeps it a value, and YAML
    ignores the space."""
    argv = list(argv)
    for i, arg in enumerate(argv[:-2]):
        if arg in ("-p", "--parameter", "-s", "--set") and argv[i + 2].startswith("-"):
            argv[i + 2] = " " + argv[i + 2]
    return argv


def main(argv: list[str] | None = None) -> int:
    from robattr.book.notebooks import project_root
    from robattr.book.params import ParameterError

    args = _parser().parse_args(_protect_values(sys.argv[1:] if argv is None else argv))
    try:
        if args.command == "data":
            return _data(args)
        root = project_root(args.root)
        if args.command == "list":
            return _list(root, args.profile)
        if args.command == "run":
            return _run(root, args)
        if args.command == "sweep":
            return _sweep(root, args)
        if args.command == "plan":
            return _plan(root, args)
        if args.command == "train":
            return _train(root, args)
        if args.command == "zoo":
            return _zoo(root, args)
        return _build(root, args)
    except (ParameterError, FileNotFoundError) as err:
        print(f"robattr: error: {err}", file=sys.stderr)
        return 2
    except ValueError as err:             # bad --jobs, --address without ray, ...
        print(f"robattr: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:                # data fetch without a network, a full disk, ...
        print(f"robattr: error: {err}", file=sys.stderr)
        return 1
    except RuntimeError as err:           # jupyter-book failed, Ray missing or too small
        print(f"robattr: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
