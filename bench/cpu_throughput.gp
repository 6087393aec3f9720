# Chart of bench/cpu_throughput.sh's results: gnuplot -e "datafile='X.dat'; bycfg='Y.dat'; outfile='X.png';
# threads=2" cpu_throughput.gp. Left: tokens/s of training (1 rank x T threads, T ranks x 1 thread) and of evaluation.
# Right: achieved GFLOP/s of training next to the sgemm ceiling measured in the same run.
set terminal pngcairo size 1200,480 font ",11"
set output outfile
set multiplot layout 1,2 title "rnn\\_dist CPU backend, fortunes corpus (fp32)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set grid ytics
set key top left
set yrange [0:*]

# bycfg columns: 1 config, 2 train tok/s 1xT, 3 train tok/s Tx1, 4 eval tok/s 1xT.
set title "tokens/s (log scale)"
set logscale y
set yrange [100:*]
plot bycfg using 2:xtic(1) title sprintf("train, 1 rank x %d threads", threads) lc rgb "#1f77b4", \
     '' using 3 title sprintf("train, %d ranks x 1 thread", threads) lc rgb "#ff7f0e", \
     '' using 4 title "evaluation, 1 rank" lc rgb "#2ca02c"

# datafile columns: 1 config, 2 ranks, 3 threads, 4 train tok/s, 5 GFLOP/s, 6 sgemm GFLOP/s, 7 ratio.
unset logscale y
set yrange [0:*]
set key below  # above the bars it would hide the ceilings
set title "GFLOP/s: training GEMMs vs sgemm ceiling"
plot datafile using 5:xtic(sprintf("%s %dx%d", stringcolumn(1), $2, $3)) title "training (achieved)" lc rgb "#1f77b4", \
     '' using 6 title "sgemm n=1024 (same run)" lc rgb "#7f7f7f"
unset multiplot
