"""BibTeX entries for the methods and models the reports rely on: those every report cites, and those a report cites
only when it holds what they are the source of."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from mlflow_recsys.stats._comparison import ComparisonReport

__all__ = ["references_bibtex"]

#: Cited by every report.
_BIBTEX = r"""@article{efron1979bootstrap,
  author  = {Efron, Bradley},
  title   = {Bootstrap Methods: Another Look at the Jackknife},
  journal = {The Annals of Statistics},
  volume  = {7},
  number  = {1},
  pages   = {1--26},
  year    = {1979},
  doi     = {10.1214/aos/1176344552}
}

@inproceedings{liang2018vae,
  author    = {Liang, Dawen and Krishnan, Rahul G. and Hoffman, Matthew D. and Jebara, Tony},
  title     = {Variational Autoencoders for Collaborative Filtering},
  booktitle = {Proceedings of the 2018 World Wide Web Conference},
  pages     = {689--698},
  year      = {2018},
  doi       = {10.1145/3178876.3186150}
}

@inproceedings{smucker2007comparison,
  author    = {Smucker, Mark D. and Allan, James and Carterette, Ben},
  title     = {A Comparison of Statistical Significance Tests for Information Retrieval Evaluation},
  booktitle = {Proceedings of the Sixteenth ACM Conference on Information and Knowledge Management},
  pages     = {623--632},
  year      = {2007},
  doi       = {10.1145/1321440.1321528}
}

@article{phipson2010permutation,
  author  = {Phipson, Belinda and Smyth, Gordon K.},
  title   = {Permutation P-values Should Never Be Zero: Calculating Exact P-values When Permutations Are Randomly Drawn},
  journal = {Statistical Applications in Genetics and Molecular Biology},
  volume  = {9},
  number  = {1},
  year    = {2010},
  doi     = {10.2202/1544-6115.1585}
}

@article{holm1979simple,
  author  = {Holm, Sture},
  title   = {A Simple Sequentially Rejective Multiple Test Procedure},
  journal = {Scandinavian Journal of Statistics},
  volume  = {6},
  number  = {2},
  pages   = {65--70},
  year    = {1979}
}

@book{davison1997bootstrap,
  author    = {Davison, A. C. and Hinkley, D. V.},
  title     = {Bootstrap Methods and their Application},
  publisher = {Cambridge University Press},
  year      = {1997},
  doi       = {10.1017/CBO9780511802843}
}

@inproceedings{steck2019ease,
  author    = {Steck, Harald},
  title     = {Embarrassingly Shallow Autoencoders for Sparse Data},
  booktitle = {The World Wide Web Conference},
  pages     = {3251--3257},
  year      = {2019},
  doi       = {10.1145/3308558.3313710}
}

@inproceedings{vancura2022elsa,
  author    = {Van\v{c}ura, Vojt\v{e}ch and Alves, Rodrigo and Kasalick\'{y}, Petr and Kord\'{i}k, Pavel},
  title     = {Scalable Linear Shallow Autoencoder for Collaborative Filtering},
  booktitle = {Proceedings of the 16th ACM Conference on Recommender Systems},
  pages     = {604--609},
  year      = {2022},
  doi       = {10.1145/3523227.3551482}
}

@book{westfall1993resampling,
  author    = {Westfall, Peter H. and Young, S. Stanley},
  title     = {Resampling-Based Multiple Testing: Examples and Methods for p-Value Adjustment},
  publisher = {Wiley},
  year      = {1993}
}

@article{romano2005stepdown,
  author  = {Romano, Joseph P. and Wolf, Michael},
  title   = {Exact and Approximate Stepdown Methods for Multiple Hypothesis Testing},
  journal = {Journal of the American Statistical Association},
  volume  = {100},
  number  = {469},
  pages   = {94--108},
  year    = {2005},
  doi     = {10.1198/016214504000000539}
}

@article{beran1988balanced,
  author  = {Beran, Rudolf},
  title   = {Balanced Simultaneous Confidence Sets},
  journal = {Journal of the American Statistical Association},
  volume  = {83},
  number  = {403},
  pages   = {679--686},
  year    = {1988},
  doi     = {10.1080/01621459.1988.10478648}
}

@article{lakens2013effect,
  author  = {Lakens, Dani{\"e}l},
  title   = {Calculating and Reporting Effect Sizes to Facilitate Cumulative Science: A Practical Primer for t-tests and
             ANOVAs},
  journal = {Frontiers in Psychology},
  volume  = {4},
  pages   = {863},
  year    = {2013},
  doi     = {10.3389/fpsyg.2013.00863}
}

@article{dixon1946sign,
  author  = {Dixon, W. J. and Mood, A. M.},
  title   = {The Statistical Sign Test},
  journal = {Journal of the American Statistical Association},
  volume  = {41},
  number  = {236},
  pages   = {557--566},
  year    = {1946},
  doi     = {10.1080/01621459.1946.10501898}
}

@book{cohen1988power,
  author    = {Cohen, Jacob},
  title     = {Statistical Power Analysis for the Behavioral Sciences},
  edition   = {2},
  publisher = {Lawrence Erlbaum Associates},
  year      = {1988},
  doi       = {10.4324/9780203771587}
}
"""  # noqa: E501 (a title that wrapped would change the BibTeX written out)

#: Cited by a report with exploratory slices: Cochran's Q and I², the heterogeneity across a slice's strata.
_SLICES_BIBTEX = r"""@article{cochran1954combination,
  author  = {Cochran, William G.},
  title   = {The Combination of Estimates from Different Experiments},
  journal = {Biometrics},
  volume  = {10},
  number  = {1},
  pages   = {101--129},
  year    = {1954},
  doi     = {10.2307/3001666}
}

@article{higgins2002quantifying,
  author  = {Higgins, Julian P. T. and Thompson, Simon G.},
  title   = {Quantifying Heterogeneity in a Meta-Analysis},
  journal = {Statistics in Medicine},
  volume  = {21},
  number  = {11},
  pages   = {1539--1558},
  year    = {2002},
  doi     = {10.1002/sim.1186}
}
"""


def references_bibtex(*reports: ComparisonReport) -> str:
    """BibTeX entries for the methods and models that ``reports`` rely on; with no report, every entry.

    Every report cites the same core entries (the bootstrap, the tests, the corrections, the effect sizes, the models);
    Cochran (1954) and Higgins & Thompson (2002), the sources of the heterogeneity statistics, are added when one of
    ``reports`` holds exploratory slices. Called without a report, it returns all of them, as ``docs/citing.md`` lists
    them.

    Parameters
    ----------
    *reports:
        The reports a document shows (e.g. the representative-seed and the seed-averaged comparison).

    Returns
    -------
    str
        The entries, separated by blank lines, ending in a newline.
    """
    if not reports or any(r.slices is not None for r in reports):
        return _BIBTEX + "\n" + _SLICES_BIBTEX
    return _BIBTEX
