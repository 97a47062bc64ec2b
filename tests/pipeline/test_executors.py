"""The local engine keeps order and gives the same results inline and in processes."""

from neardup.pipeline.executors import LocalEngine


def square(x: int) -> int:
    return x * x


def test_results_in_submission_order_with_processes():
    with LocalEngine(workers=2, window_per_worker=1) as engine:
        assert list(engine.map(square, range(50))) == [x * x for x in range(50)]


def test_inline_engine_matches():
    with LocalEngine(workers=1) as engine:
        assert list(engine.map(square, iter(range(10)))) == [x * x for x in range(10)]


def test_input_is_consumed_lazily():
    seen = []

    def tasks():
        for i in range(100):
            seen.append(i)
            yield i

    with LocalEngine(workers=2, window_per_worker=2) as engine:
        results = engine.map(square, tasks())
        next(results)
        assert len(seen) <= 5  # at most the window plus one is pulled ahead
        assert len(list(results)) == 99
